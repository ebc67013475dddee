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
#include <stdint.h>
#include <time.h>

#include "common/error.h"

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

#define TUI_MAX_COLS	10
#define TUI_MAX_ROWS	4096 /* per page */
#define TUI_CELL_MAX	256  /* bytes of one cell */
#define TUI_FILTER_MAX	48
#define TUI_INPUT_MAX	200 /* a form's line */
#define TUI_REFRESH_MS	2000
#define TUI_MIN_WIDTH	56
#define TUI_MIN_HEIGHT	8
#define TUI_NOW_ENV	"GANTRY_TUI_NOW" /* a fixed clock (seconds), for tests */

/* One row of a page: its cells (printable ASCII, at most TUI_CELL_MAX
 * bytes each), the sandbox it is about (NULL: none) and what an action on
 * it names (a share's tag, a port's spec, a secret's name, a
 * destination as "ADDR PROTO PORT" or "dns NAME"; NULL: none), exact. */
struct tui_row {
	char *cells[TUI_MAX_COLS];
	char *sandbox;
	char *key;
	bool running, paused; /* the sandbox's, on page 1 */
};

struct tui_table {
	struct tui_row *rows;
	size_t n;
};

#define TUI_LOG_LINES 500 /* of a log, the last read */

/* What the pages show, read at one time. */
struct tui_data {
	struct tui_table pages[TUI_PAGES];
	char *error; /* why the last read failed, or NULL */
	bool loaded; /* read at all (else the first read is under way) */
	time_t now;
	char **log; /* the log asked for (tui_data_load_log), its last lines */
	size_t nlog;
};

/* The last CPU readings of the running sandboxes, kept by the reader
 * between reads: a CPU share is the time used since the last one. */
struct tui_cpu {
	struct tui_cpu_one {
		char name[72];
		uint64_t cpu_ns, at_ns;
	} * v;
	size_t n;
};
void tui_cpu_free(struct tui_cpu *c);

/* data.c: read everything now (now: the clock ages are counted from;
 * cpu: the readings kept, updated here, NULL: no CPU share). A sandbox
 * whose own files do not read shows what did; d->error says why when the
 * list itself cannot be had. */
void tui_data_load(struct tui_data *d, time_t now, struct tui_cpu *cpu);
void tui_data_free(struct tui_data *d);
/* The last TUI_LOG_LINES of sandbox name's log which (enum sandbox_log)
 * into d->log. */
void tui_data_load_log(struct tui_data *d, const char *name, int which);
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

/* What a key asks of the lifecycle: done on the actions' thread (act.c),
 * but for a shell, which takes the terminal (tui.c). */
enum tui_job_kind {
	TUI_JOB_NONE,
	TUI_JOB_CREATE, /* arg: "NAME [IMAGE]" */
	TUI_JOB_START,	/* resume */
	TUI_JOB_STOP,
	TUI_JOB_DELETE,
	TUI_JOB_PAUSE,
	TUI_JOB_UNPAUSE,
	TUI_JOB_SHELL,
	TUI_JOB_ALLOW,	 /* arg: a Traffic row's key */
	TUI_JOB_BLOCK,	 /* arg: the same */
	TUI_JOB_SHARE_ADD, /* arg: a -share spec */
	TUI_JOB_SHARE_RM,  /* arg: its tag */
	TUI_JOB_PUBLISH,   /* arg: a -p spec */
	TUI_JOB_UNPUBLISH, /* arg: the same */
	TUI_JOB_SECRET_ADD, /* arg: a -secret spec with a source (=@FILE, ='!CMD') */
	TUI_JOB_SECRET_RM,  /* arg: its name */
	TUI_JOB_RESIZE,	    /* arg: "CPUS MEMORY" (512m, 2g; a number is MiB) */
};

struct tui_job {
	enum tui_job_kind kind;
	char sandbox[72];
	char arg[TUI_CELL_MAX + 1];
};

struct tui_state {
	enum tui_page page;
	size_t sel, top;		 /* selected row, first row shown */
	char filter[TUI_FILTER_MAX + 1]; /* rows that contain it, any case */
	char input[TUI_INPUT_MAX + 1];	 /* what is being typed after /, : or a form's label */
	char prompt;			 /* '/', ':' or 'f' (a form) while typing, else 0 */
	bool help;
	struct tui_job job;	  /* asked by the last key (kind NONE: nothing) */
	struct tui_job form;	  /* what the form being typed makes */
	char form_label[160];
	struct tui_job confirm;	  /* waiting for y (kind NONE: nothing) */
	char confirm_text[160];
	char toast[200];	  /* the last action's word, shown until a key */
	/* The logs view (l on Sandboxes): of which sandbox, which log. */
	bool logs;
	int log_which; /* enum sandbox_log */
	char log_sandbox[72];
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

enum tui_action { TUI_NONE, TUI_QUIT, TUI_RELOAD, TUI_ACT /* st->job is asked */ };
/* The keys (curses' codes; '\n' is Enter, 27 Escape): their effect on st,
 * and what the caller does next. */
enum tui_action tui_key(struct tui_state *st, const struct tui_data *d, int key, int height);
/* A click (button 1) at column x, line y of a width x height screen: a
 * tab shows its page, a row is selected (wheel: up < 0, down > 0). */
void tui_click(struct tui_state *st, const struct tui_data *d, int x, int y, int width,
	       int height);
void tui_wheel(struct tui_state *st, const struct tui_data *d, int dir, int height);
/* The rows of the page shown that pass the filter: their indices into
 * the page's rows (at most n, which the caller gives as the page's; idx
 * NULL: only their count). */
size_t tui_visible(const struct tui_state *st, const struct tui_data *d, size_t *idx, size_t n);

/* act.c: a job's work through the lifecycle (not a shell's): 0, or -1
 * with err; *done says what happened, in a line (allocated). */
int tui_job_run(const struct tui_job *j, char **done, gantry_error_t *err);
/* What a job is called while it runs ("stopping web"). */
void tui_job_describe(const struct tui_job *j, char *buf, size_t len);

/* tui.c: `gantry tui`. */
int tui_main(int argc, char **argv);

#endif
