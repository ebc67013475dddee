/* The dashboard's screen and keys, without a terminal (tui.h): what
 * tui_render draws is what the tests compare, at any width. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "tui/tui.h"

static const char *const page_names[TUI_PAGES] = {
	[TUI_SANDBOXES] = "Sandboxes", [TUI_TRAFFIC] = "Traffic", [TUI_RULES] = "Rules",
	[TUI_MOUNTS] = "Mounts",       [TUI_PORTS] = "Ports",	  [TUI_SECRETS] = "Secrets",
	[TUI_AUDIT] = "Audit",	       [TUI_SNAPSHOTS] = "Snapshots",
};

/* Each page's columns, in the order of its rows' cells. */
static const struct tui_column cols_sandboxes[] = {
	{ "NAME", 16, 0 },     { "STATE", 9, 0 }, { "CPU", 5, 1 },   { "CPUS", 5, 2 },
	{ "MEM", 7, 1 },       { "UP", 5, 2 },	  { "AGE", 5, 3 },   { "ISOLATION", 10, 4 },
	{ "PORTS", 6, 3 },     { "IMAGE", 10, 1 },
};
static const struct tui_column cols_traffic[] = {
	{ "VERDICT", 8, 0 }, { "SANDBOX", 14, 1 }, { "PROTO", 6, 2 }, { "TX", 8, 3 },
	{ "RX", 8, 3 },	     { "DESTINATION", 24, 0 }, { "REASON", 10, 2 },
};
static const struct tui_column cols_rules[] = {
	{ "SANDBOX", 14, 1 }, { "ACTION", 8, 0 }, { "TARGET", 24, 0 },
	{ "PROTO", 6, 2 },    { "PORTS", 10, 2 },
};
static const struct tui_column cols_mounts[] = {
	{ "SANDBOX", 14, 1 }, { "MODE", 5, 0 }, { "TAG", 12, 3 }, { "CONTAINER", 20, 0 },
	{ "HOST PATH", 20, 2 },
};
static const struct tui_column cols_ports[] = {
	{ "SANDBOX", 14, 0 }, { "HOST", 22, 0 }, { "GUEST", 7, 0 }, { "PROTO", 6, 1 },
};
static const struct tui_column cols_secrets[] = {
	{ "SANDBOX", 14, 0 }, { "NAME", 20, 0 }, { "KIND", 9, 1 }, { "STATE", 11, 1 },
	{ "HOSTS", 20, 2 },
};
static const struct tui_column cols_audit[] = {
	{ "TIME", 9, 2 },      { "SANDBOX", 14, 1 }, { "KIND", 10, 0 },
	{ "DECISION", 9, 0 }, { "SECRET", 12, 2 },  { "DETAIL", 16, 1 },
};
static const struct tui_column cols_snapshots[] = {
	{ "NAME", 24, 0 }, { "FROM", 14, 1 }, { "AGE", 5, 2 }, { "IMAGE", 16, 1 },
};

static const struct {
	const struct tui_column *cols;
	size_t n;
	const char *empty; /* what an empty page says */
} pages[TUI_PAGES] = {
	[TUI_SANDBOXES] = { cols_sandboxes, ARRAY_SIZE(cols_sandboxes),
			    "No sandboxes. gantry start NAME makes one." },
	[TUI_TRAFFIC] = { cols_traffic, ARRAY_SIZE(cols_traffic), "No traffic recorded." },
	[TUI_RULES] = { cols_rules, ARRAY_SIZE(cols_rules), "No sandbox with a network." },
	[TUI_MOUNTS] = { cols_mounts, ARRAY_SIZE(cols_mounts), "No shares." },
	[TUI_PORTS] = { cols_ports, ARRAY_SIZE(cols_ports), "No published ports." },
	[TUI_SECRETS] = { cols_secrets, ARRAY_SIZE(cols_secrets),
			  "No secrets. Values are never shown here." },
	[TUI_AUDIT] = { cols_audit, ARRAY_SIZE(cols_audit), "No security events." },
	[TUI_SNAPSHOTS] = { cols_snapshots, ARRAY_SIZE(cols_snapshots), "No snapshots." },
};

static const char *const help[] = {
	"Keys",
	"  1-8            a page: 1 Sandboxes 2 Traffic 3 Rules 4 Mounts",
	"                 5 Ports 6 Secrets 7 Audit 8 Snapshots",
	"  Tab, ], [      the next or the previous page",
	"  :NAME Enter    a page by its name (:traffic, :ports)",
	"  j k, Down Up   the next or the previous row",
	"  g G, Home End  the first or the last row",
	"  PgDn PgUp      a screen down or up",
	"  /TEXT Enter    only rows that hold TEXT (any case); / Enter shows all",
	"  Esc            leave help, a prompt or the filter",
	"  r              read everything again (it is read every 2 s)",
	"Sandboxes: n new (NAME [IMAGE])  s start or stop  p pause or unpause",
	"           Enter or o a shell in it  d delete (asks first)  l its logs",
	"           e its vCPUs and memory for the next boot",
	"Traffic: a allow  b block the destination (a rule first in its policy)",
	"Mounts, Ports, Secrets: a add  d remove (asks first)",
	"  ?              this help (the mouse: a tab, a row, the wheel)",
	"  q              quit",
	"",
	"Secrets show names and kinds only: their values never reach this screen.",
};

const char *tui_page_name(enum tui_page p)
{
	return (unsigned)p < TUI_PAGES ? page_names[p] : "?";
}

const struct tui_column *tui_page_columns(enum tui_page p, size_t *n)
{
	*n = pages[p].n;
	return pages[p].cols;
}

static bool row_matches(const struct tui_row *r, size_t ncols, const char *filter)
{
	if (filter[0] == '\0')
		return true;
	for (size_t c = 0; c < ncols; c++)
		if (r->cells[c] && strcasestr(r->cells[c], filter))
			return true;
	return false;
}

size_t tui_visible(const struct tui_state *st, const struct tui_data *d, size_t *idx, size_t n)
{
	const struct tui_table *t = &d->pages[st->page];
	size_t k = 0;

	for (size_t i = 0; i < t->n && k < n; i++)
		if (row_matches(&t->rows[i], pages[st->page].n, st->filter)) {
			if (idx)
				idx[k] = i;
			k++;
		}
	return k;
}

/* Which columns fit in width, highest priority first kept, and how wide
 * each is drawn: the last one kept takes what is left. */
static size_t fit_columns(enum tui_page p, int width, int *w, bool *keep)
{
	const struct tui_column *c = pages[p].cols;
	size_t n = pages[p].n, kept = 0, last = 0;
	int used = 0;

	for (int prio = 0; prio <= 4; prio++)
		for (size_t i = 0; i < n; i++)
			if (c[i].prio == prio && used + c[i].width + 1 <= width) {
				keep[i] = true;
				used += c[i].width + 1;
			}
	for (size_t i = 0; i < n; i++) {
		w[i] = keep[i] ? c[i].width : 0;
		if (keep[i]) {
			kept++;
			last = i;
		}
	}
	if (kept)
		w[last] += width - used;
	return kept;
}

/* s into dst at width w (and a space), cut with '~' when longer. */
static void put_cell(char *dst, const char *s, int w)
{
	int len = (int)strlen(s);

	if (w <= 0)
		return;
	memset(dst, ' ', (size_t)w);
	if (len <= w - 1) {
		memcpy(dst, s, (size_t)len);
	} else {
		memcpy(dst, s, (size_t)(w - 2 > 0 ? w - 2 : 0));
		if (w >= 2)
			dst[w - 2] = '~';
	}
}

static void line_set(struct tui_screen *s, int y, enum tui_look look, const char *text)
{
	size_t len = strlen(text);

	if (y < 0 || y >= s->height)
		return;
	memset(s->lines[y], ' ', (size_t)s->width);
	memcpy(s->lines[y], text, len < (size_t)s->width ? len : (size_t)s->width);
	s->looks[y] = look;
}

/* " 1 Sandboxes  2 Traffic ...", the page shown in brackets; on a narrow
 * screen the other pages' names are cut until the line fits (to their
 * digits at the least). starts (may be NULL): where each tab begins. */
static void tab_line(const struct tui_state *st, int width, char *buf, size_t size,
		     int starts[TUI_PAGES + 1])
{
	size_t len = 0;

	for (int cut = 9; cut >= 0; cut--) {
		len = 0;
		for (int p = 0; p < TUI_PAGES; p++) {
			bool cur = p == (int)st->page;
			int n = cur ? 9 : cut;

			if (starts)
				starts[p] = (int)len;
			len += (size_t)snprintf(buf + len, size - len, "%s%d%s%.*s%s",
						cur ? "[" : " ", p + 1, n ? " " : "", n,
						page_names[p], cur ? "]" : " ");
		}
		if ((int)len <= width)
			break;
	}
	if (starts)
		starts[TUI_PAGES] = (int)len;
}

static void tabs(const struct tui_state *st, struct tui_screen *s)
{
	char buf[512];

	tab_line(st, s->width, buf, sizeof(buf), NULL);
	line_set(s, 0, TUI_TABS, buf);
}

static void status(const struct tui_state *st, const struct tui_data *d, size_t shown,
		   size_t total, struct tui_screen *s)
{
	char buf[512];

	if (st->prompt == 'f')
		snprintf(buf, sizeof(buf), "%s: %s_", st->form_label, st->input);
	else if (st->prompt)
		snprintf(buf, sizeof(buf), "%c%s_", st->prompt, st->input);
	else if (st->confirm.kind)
		snprintf(buf, sizeof(buf), "%s? y or n", st->confirm_text);
	else if (st->toast[0])
		snprintf(buf, sizeof(buf), " %s", st->toast);
	else if (!d->loaded)
		snprintf(buf, sizeof(buf), " reading...");
	else if (d->error)
		snprintf(buf, sizeof(buf), "error: %s", d->error);
	else if (st->filter[0])
		snprintf(buf, sizeof(buf), " %zu of %zu rows hold \"%s\"   / clear  ? help  q quit",
			 shown, total, st->filter);
	else
		snprintf(buf, sizeof(buf), " %zu rows   / filter  : page  ? help  q quit", total);
	line_set(s, s->height - 1, d->error && !st->prompt ? TUI_ERROR : TUI_STATUS, buf);
}

void tui_render(const struct tui_state *st, const struct tui_data *d, int width, int height,
		struct tui_screen *s)
{
	const struct tui_table *t = &d->pages[st->page];
	const struct tui_column *c = pages[st->page].cols;
	size_t n = pages[st->page].n, *idx, shown;
	int w[TUI_MAX_COLS] = { 0 }, x, rows;
	bool keep[TUI_MAX_COLS] = { false };
	char *buf;

	s->width = width > 0 ? width : 1;
	s->height = height > 0 ? height : 1;
	s->lines = xzalloc((size_t)s->height * sizeof(*s->lines));
	s->looks = xzalloc((size_t)s->height * sizeof(*s->looks));
	for (int y = 0; y < s->height; y++) {
		s->lines[y] = xmalloc((size_t)s->width + 1);
		memset(s->lines[y], ' ', (size_t)s->width);
		s->lines[y][s->width] = '\0';
	}
	if (width < TUI_MIN_WIDTH || height < TUI_MIN_HEIGHT) {
		buf = NULL;
		xasprintf(&buf, "gantry tui wants %dx%d at least", TUI_MIN_WIDTH, TUI_MIN_HEIGHT);
		line_set(s, 0, TUI_ERROR, buf);
		free(buf);
		return;
	}
	tabs(st, s);
	if (st->logs) {
		static const char *const which[] = { "daemon", "console", "network" };
		int rows = s->height - 3, first;
		cleanup_free char *who = tui_cell(st->log_sandbox);

		buf = NULL;
		xasprintf(&buf, "LOG %s of %s, read every 2 s (c console, d daemon, n network)",
			  which[st->log_which % 3], who);
		line_set(s, 1, TUI_HEADER, buf);
		free(buf);
		first = (int)d->nlog > rows ? (int)d->nlog - rows : 0;
		for (int y = 0; first + y < (int)d->nlog && y < rows; y++)
			line_set(s, 2 + y, TUI_PLAIN, d->log[first + y]);
		line_set(s, s->height - 1, TUI_STATUS, " Esc back   r read now   q quit");
		return;
	}
	if (st->help) {
		for (size_t i = 0; i < ARRAY_SIZE(help) && (int)i + 2 < s->height - 1; i++)
			line_set(s, (int)i + 2, i == 0 ? TUI_HEADER : TUI_PLAIN, help[i]);
		line_set(s, s->height - 1, TUI_STATUS, " Esc or ? back   q quit");
		return;
	}
	buf = xmalloc((size_t)width + 1);
	fit_columns(st->page, width, w, keep);
	memset(buf, ' ', (size_t)width);
	buf[width] = '\0';
	for (size_t i = 0, x0 = 0; i < n; i++)
		if (keep[i]) {
			put_cell(buf + x0, c[i].title, w[i]);
			x0 += (size_t)w[i] + 1;
		}
	line_set(s, 1, TUI_HEADER, buf);

	idx = xmalloc((t->n ? t->n : 1) * sizeof(*idx));
	shown = tui_visible(st, d, idx, t->n);
	rows = s->height - 3;
	if (t->n == 0 && d->loaded)
		line_set(s, 3, TUI_PLAIN, pages[st->page].empty);
	for (int y = 0; y < rows && st->top + (size_t)y < shown; y++) {
		size_t r = idx[st->top + (size_t)y];

		memset(buf, ' ', (size_t)width);
		x = 0;
		for (size_t i = 0; i < n; i++)
			if (keep[i]) {
				put_cell(buf + x, t->rows[r].cells[i] ? t->rows[r].cells[i] : "",
					 w[i]);
				x += w[i] + 1;
			}
		line_set(s, 2 + y, st->top + (size_t)y == st->sel ? TUI_SELECTED : TUI_PLAIN, buf);
	}
	status(st, d, shown, t->n, s);
	free(idx);
	free(buf);
}

void tui_screen_free(struct tui_screen *s)
{
	for (int y = 0; s->lines && y < s->height; y++)
		free(s->lines[y]);
	free(s->lines);
	free(s->looks);
	memset(s, 0, sizeof(*s));
}

/* Keep the selection on a visible row, and in view. */
static void clamp(struct tui_state *st, const struct tui_data *d, int height)
{
	size_t shown = tui_visible(st, d, NULL, d->pages[st->page].n);
	size_t rows = height > 3 ? (size_t)height - 3 : 1;

	if (shown == 0) {
		st->sel = st->top = 0;
		return;
	}
	if (st->sel >= shown)
		st->sel = shown - 1;
	if (st->sel < st->top)
		st->top = st->sel;
	if (st->sel >= st->top + rows)
		st->top = st->sel - rows + 1;
}

static void go_page(struct tui_state *st, int p)
{
	st->page = (enum tui_page)((p + TUI_PAGES) % TUI_PAGES);
	st->sel = st->top = 0;
	st->help = false;
}

/* :NAME: the page whose name starts with it, any case. */
static void jump(struct tui_state *st, const char *name)
{
	size_t len = strlen(name);

	for (int p = 0; len && p < TUI_PAGES; p++)
		if (strncasecmp(page_names[p], name, len) == 0) {
			go_page(st, p);
			return;
		}
}

static void prompt_key(struct tui_state *st, int key)
{
	size_t len = strlen(st->input);

	if (key == 27) {
		st->prompt = 0;
	} else if (key == '\n' || key == '\r' || key == TUI_KEY_ENTER) {
		if (st->prompt == '/') {
			snprintf(st->filter, sizeof(st->filter), "%.*s", TUI_FILTER_MAX, st->input);
			st->sel = st->top = 0;
		} else if (st->prompt == 'f') {
			st->job = st->form;
			snprintf(st->job.arg, sizeof(st->job.arg), "%s", st->input);
		} else {
			jump(st, st->input);
		}
		st->prompt = 0;
	} else if (key == TUI_KEY_BACKSPACE || key == 127 || key == 8) {
		if (len)
			st->input[len - 1] = '\0';
		else
			st->prompt = 0;
	} else if (key >= 0x20 && key < 0x7f &&
		   len < (st->prompt == 'f' ? TUI_INPUT_MAX : TUI_FILTER_MAX)) {
		st->input[len] = (char)key;
		st->input[len + 1] = '\0';
	}
}

/* The row selected, or NULL. */
static const struct tui_row *selected(const struct tui_state *st, const struct tui_data *d)
{
	const struct tui_table *t = &d->pages[st->page];
	size_t *idx = xmalloc((t->n ? t->n : 1) * sizeof(*idx)), shown;
	const struct tui_row *r = NULL;

	shown = tui_visible(st, d, idx, t->n);
	if (st->sel < shown)
		r = &t->rows[idx[st->sel]];
	free(idx);
	return r;
}

static void ask(struct tui_state *st, enum tui_job_kind kind, const struct tui_row *r,
		const char *arg)
{
	st->job = (struct tui_job){ .kind = kind };
	snprintf(st->job.sandbox, sizeof(st->job.sandbox), "%s", r && r->sandbox ? r->sandbox : "");
	snprintf(st->job.arg, sizeof(st->job.arg), "%s", arg ? arg : "");
}

static void confirm(struct tui_state *st, enum tui_job_kind kind, const struct tui_row *r,
		    const char *what)
{
	ask(st, kind, r, r->key);
	st->confirm = st->job;
	st->job.kind = TUI_JOB_NONE;
	snprintf(st->confirm_text, sizeof(st->confirm_text), "%s", what);
}

static void form(struct tui_state *st, enum tui_job_kind kind, const struct tui_row *r,
		 const char *label)
{
	ask(st, kind, r, NULL);
	st->form = st->job;
	st->job.kind = TUI_JOB_NONE;
	snprintf(st->form_label, sizeof(st->form_label), "%s", label);
	st->prompt = 'f';
	st->input[0] = '\0';
}

/* A page's own keys: true when key was one. */
static bool page_key(struct tui_state *st, const struct tui_data *d, int key)
{
	const struct tui_row *r = selected(st, d);
	char what[160];

	if (st->page == TUI_SANDBOXES && key == 'n') {
		form(st, TUI_JOB_CREATE, NULL, "new sandbox: NAME [IMAGE]");
		return true;
	}
	if (r == NULL || r->sandbox == NULL)
		return false;
	switch (st->page) {
	case TUI_SANDBOXES:
		if (key == 's')
			ask(st, r->running ? TUI_JOB_STOP : TUI_JOB_START, r, NULL);
		else if (key == 'p' && r->running)
			ask(st, r->paused ? TUI_JOB_UNPAUSE : TUI_JOB_PAUSE, r, NULL);
		else if ((key == 'o' || key == '\n' || key == TUI_KEY_ENTER) && r->running)
			ask(st, TUI_JOB_SHELL, r, NULL);
		else if (key == 'd' || key == 'x') {
			snprintf(what, sizeof(what), "delete %s and its writable layer",
				 r->cells[0]);
			confirm(st, TUI_JOB_DELETE, r, what);
		} else if (key == 'e') {
			snprintf(what, sizeof(what), "size of %s for its next boot: CPUS MEMORY",
				 r->cells[0]);
			form(st, TUI_JOB_RESIZE, r, what);
		} else if (key == 'l') {
			st->logs = true;
			st->log_which = 1; /* the console first */
			snprintf(st->log_sandbox, sizeof(st->log_sandbox), "%s", r->sandbox);
		} else
			return false;
		return true;
	case TUI_TRAFFIC:
		if ((key != 'a' && key != 'b') || r->key == NULL)
			return false;
		ask(st, key == 'a' ? TUI_JOB_ALLOW : TUI_JOB_BLOCK, r, r->key);
		return true;
	case TUI_MOUNTS:
	case TUI_PORTS:
	case TUI_SECRETS: {
		static const enum tui_job_kind add[] = { [TUI_MOUNTS] = TUI_JOB_SHARE_ADD,
							 [TUI_PORTS] = TUI_JOB_PUBLISH,
							 [TUI_SECRETS] = TUI_JOB_SECRET_ADD };
		static const enum tui_job_kind rm[] = { [TUI_MOUNTS] = TUI_JOB_SHARE_RM,
							[TUI_PORTS] = TUI_JOB_UNPUBLISH,
							[TUI_SECRETS] = TUI_JOB_SECRET_RM };
		static const char *const labels[] = {
			[TUI_MOUNTS] = "share into %s: [TAG=]HOST_DIR[@CTR_PATH][,ro]",
			[TUI_PORTS] = "publish on %s: [BIND:]HOST_PORT:GUEST_PORT[/udp]",
			[TUI_SECRETS] = "secret for %s: NAME=@FILE or NAME='!COMMAND'",
		};

		if (key == 'a') {
			snprintf(what, sizeof(what), labels[st->page], r->sandbox);
			form(st, add[st->page], r, what);
		} else if (key == 'd' && r->key) {
			snprintf(what, sizeof(what), "remove %s from %s", r->cells[1],
				 r->cells[0]);
			confirm(st, rm[st->page], r, what);
		} else {
			return false;
		}
		return true;
	}
	default:
		return false;
	}
}

enum tui_action tui_key(struct tui_state *st, const struct tui_data *d, int key, int height)
{
	size_t page = height > 4 ? (size_t)height - 4 : 1;

	st->job.kind = TUI_JOB_NONE;
	if (st->prompt) {
		prompt_key(st, key);
		clamp(st, d, height);
		return st->job.kind ? TUI_ACT : TUI_NONE;
	}
	if (st->confirm.kind) {
		if (key == 'y' || key == 'Y')
			st->job = st->confirm;
		st->confirm.kind = TUI_JOB_NONE;
		return st->job.kind ? TUI_ACT : TUI_NONE;
	}
	st->toast[0] = '\0';
	if (st->logs) {
		if (key == 'q')
			return TUI_QUIT;
		if (key == 27)
			st->logs = false;
		else if (key == 'c' || key == 'd' || key == 'n')
			st->log_which = key == 'd' ? 0 : key == 'c' ? 1 : 2;
		return TUI_RELOAD;
	}
	if (!st->help && page_key(st, d, key))
		return st->job.kind ? TUI_ACT : st->logs ? TUI_RELOAD : TUI_NONE;
	switch (key) {
	case 'q':
		return TUI_QUIT;
	case 27:
		if (st->help)
			st->help = false;
		else
			st->filter[0] = '\0';
		break;
	case '?':
		st->help = !st->help;
		break;
	case 'r':
		return TUI_RELOAD;
	case '/':
	case ':':
		st->prompt = (char)key;
		st->input[0] = '\0';
		st->help = false;
		break;
	case '\t':
	case ']':
		go_page(st, (int)st->page + 1);
		break;
	case TUI_KEY_BTAB:
	case '[':
		go_page(st, (int)st->page - 1);
		break;
	case 'j':
	case TUI_KEY_DOWN:
		st->sel++;
		break;
	case 'k':
	case TUI_KEY_UP:
		if (st->sel)
			st->sel--;
		break;
	case 'g':
	case TUI_KEY_HOME:
		st->sel = 0;
		break;
	case 'G':
	case TUI_KEY_END:
		st->sel = (size_t)-1 / 2;
		break;
	case TUI_KEY_NPAGE:
		st->sel += page;
		break;
	case TUI_KEY_PPAGE:
		st->sel = st->sel > page ? st->sel - page : 0;
		break;
	default:
		if (key >= '1' && key < '1' + TUI_PAGES)
			go_page(st, key - '1');
		break;
	}
	clamp(st, d, height);
	return TUI_NONE;
}

static void go_page(struct tui_state *st, int p);
static void clamp(struct tui_state *st, const struct tui_data *d, int height);

void tui_click(struct tui_state *st, const struct tui_data *d, int x, int y, int width,
	       int height)
{
	int starts[TUI_PAGES + 1];
	char buf[512];

	(void)buf;
	if (st->prompt || st->confirm.kind)
		return;
	if (y == 0) {
		tab_line(st, width, buf, sizeof(buf), starts);
		for (int p = 0; p < TUI_PAGES; p++)
			if (x >= starts[p] && x < starts[p + 1]) {
				go_page(st, p);
				st->logs = false;
			}
		return;
	}
	if (st->help || st->logs || y < 2 || y >= height - 1)
		return;
	if (st->top + (size_t)(y - 2) < tui_visible(st, d, NULL, d->pages[st->page].n))
		st->sel = st->top + (size_t)(y - 2);
	clamp(st, d, height);
}

void tui_wheel(struct tui_state *st, const struct tui_data *d, int dir, int height)
{
	if (dir < 0 && st->sel >= 3)
		st->sel -= 3;
	else if (dir < 0)
		st->sel = 0;
	else
		st->sel += 3;
	clamp(st, d, height);
}
