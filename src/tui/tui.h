/* `gantry tui`: a terminal dashboard of every sandbox (docs/tui.md).
 *
 * Three parts, as a curses program is best tested: data.c reads a
 * snapshot of what the pages show through the lifecycle library (every
 * string in it sanitised, printable ASCII); view.c is pure, a state and a
 * snapshot in, the screen's lines out, and the keys' effect on the state;
 * tui.c is the only one that talks to the terminal (ncursesw), and loads
 * snapshots on a thread of its own so the screen never waits on a
 * sandbox. */
#ifndef GANTRY_TUI_TUI_H
#define GANTRY_TUI_TUI_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

enum tui_page {
	TUI_SANDBOXES,
	TUI_TRAFFIC,
	TUI_RULES,
	TUI_MOUNTS,
	TUI_PORTS,
	TUI_SECRETS,
	TUI_AUDIT,
	TUI_SNAPSHOTS,
	TUI_PAGES
};

#define TUI_MAX_COLS	8
#define TUI_MAX_ROWS	4096 /* per page */
#define TUI_CELL_MAX	256  /* bytes of one cell */
#define TUI_FILTER_MAX	48
#define TUI_REFRESH_MS	2000
#define TUI_MIN_WIDTH	56
#define TUI_MIN_HEIGHT	8
#define TUI_NOW_ENV	"GANTRY_TUI_NOW" /* a fixed clock (seconds), for tests */

/* One row of a page: its cells (printable ASCII, at most TUI_CELL_MAX
 * bytes each) and the sandbox it is about (NULL: none). */
struct tui_row {
	char *cells[TUI_MAX_COLS];
	char *sandbox;
};

struct tui_table {
	struct tui_row *rows;
	size_t n;
};

/* What the pages show, read at one time. */
struct tui_data {
	struct tui_table pages[TUI_PAGES];
	char *error; /* why the last read failed, or NULL */
	time_t now;
};

/* data.c: read everything now (now: the clock ages are counted from). A
 * sandbox whose own files do not read shows what did; err only when the
 * list itself cannot be had (d->error then says so too). */
void tui_data_load(struct tui_data *d, time_t now);
void tui_data_free(struct tui_data *d);
/* s made safe to draw: control and non-ASCII bytes become '?', at most
 * TUI_CELL_MAX bytes (allocated). */
char *tui_cell(const char *s);

/* view.c */
struct tui_column {
	const char *title;
	int width; /* its share of the line; the last column takes the rest */
	int prio;  /* dropped first when narrow: the highest */
};
const char *tui_page_name(enum tui_page p);
const struct tui_column *tui_page_columns(enum tui_page p, size_t *n);

struct tui_state {
	enum tui_page page;
	size_t sel, top;		 /* selected row, first row shown */
	char filter[TUI_FILTER_MAX + 1]; /* rows that contain it, any case */
	char input[TUI_FILTER_MAX + 1];	 /* what is being typed after / or : */
	char prompt;			 /* '/' or ':' while typing, else 0 */
	bool help;
};

/* Each line's look; tui.c maps them to colours or to bold and reverse. */
enum tui_look { TUI_PLAIN, TUI_TABS, TUI_HEADER, TUI_SELECTED, TUI_STATUS, TUI_ERROR };

struct tui_screen {
	int width, height;
	char **lines; /* height lines of exactly width bytes */
	enum tui_look *looks;
};

/* The screen for st and d at width x height (at least TUI_MIN_*; smaller
 * says so and nothing else). */
void tui_render(const struct tui_state *st, const struct tui_data *d, int width, int height,
		struct tui_screen *out);
void tui_screen_free(struct tui_screen *s);

/* The keys tui_key takes besides characters (tui.c maps curses' to them). */
enum {
	TUI_KEY_DOWN = 0x1000,
	TUI_KEY_UP,
	TUI_KEY_HOME,
	TUI_KEY_END,
	TUI_KEY_NPAGE,
	TUI_KEY_PPAGE,
	TUI_KEY_BTAB,
	TUI_KEY_ENTER,
	TUI_KEY_BACKSPACE,
};

enum tui_action { TUI_NONE, TUI_QUIT, TUI_RELOAD };
/* The keys (curses' codes; '\n' is Enter, 27 Escape): their effect on st,
 * and what the caller does next. */
enum tui_action tui_key(struct tui_state *st, const struct tui_data *d, int key, int height);
/* The rows of the page shown that pass the filter: their indices into
 * the page's rows (at most n, which the caller gives as the page's). */
size_t tui_visible(const struct tui_state *st, const struct tui_data *d, size_t *idx, size_t n);

/* tui.c: `gantry tui`. */
int tui_main(int argc, char **argv);

#endif
