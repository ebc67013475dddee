/* `gantry tui`: the terminal side of the dashboard (tui.h). One thread
 * reads a snapshot every TUI_REFRESH_MS (or when asked) through the
 * lifecycle and hands it over; this one draws the newest and takes keys,
 * so a sandbox that is slow to answer never freezes the screen. Only the
 * lines that changed are redrawn (curses does the diffing). */
#define _XOPEN_SOURCE_EXTENDED 1
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"
#include "tui/tui.h"

struct loader {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct tui_data *ready; /* the newest snapshot, not yet taken */
	bool asked, quit;
	int wake[2]; /* a snapshot is ready, or a job done */
	/* The actions' thread: one job at a time. */
	pthread_cond_t job_cond;
	struct tui_job job; /* kind NONE: none waiting */
	bool busy;
	char result[200]; /* the last job's word, not yet shown ("" none) */
	char log_name[72]; /* the logs view's sandbox ("" none) and log */
	int log_which;
};

static void *job_loop(void *arg)
{
	struct loader *l = arg;

	pthread_mutex_lock(&l->lock);
	while (!l->quit) {
		struct tui_job j;
		gantry_error_t err = NULL;
		char *done = NULL;

		if (l->job.kind == TUI_JOB_NONE) {
			pthread_cond_wait(&l->job_cond, &l->lock);
			continue;
		}
		j = l->job;
		l->job.kind = TUI_JOB_NONE;
		l->busy = true;
		pthread_mutex_unlock(&l->lock);
		if (tui_job_run(&j, &done, &err) < 0) {
			cleanup_free char *why = tui_cell(gantry_error_str(err));

			pthread_mutex_lock(&l->lock);
			snprintf(l->result, sizeof(l->result), "error: %s", why);
		} else {
			cleanup_free char *what = tui_cell(done ? done : "done");

			pthread_mutex_lock(&l->lock);
			snprintf(l->result, sizeof(l->result), "%s", what);
		}
		free(done);
		gantry_error_free(&err);
		l->busy = false;
		l->asked = true; /* show what it changed */
		pthread_cond_signal(&l->cond);
		(void)!write(l->wake[1], "x", 1);
	}
	pthread_mutex_unlock(&l->lock);
	return NULL;
}

static time_t tui_now(void)
{
	const char *fixed = getenv(TUI_NOW_ENV);

	return fixed && *fixed ? (time_t)strtoll(fixed, NULL, 10) : time(NULL);
}

static void *load_loop(void *arg)
{
	struct loader *l = arg;
	struct tui_cpu cpu = { 0 };

	pthread_mutex_lock(&l->lock);
	while (!l->quit) {
		struct tui_data *d = xzalloc(sizeof(*d));
		struct timespec until;
		char log_name[sizeof(l->log_name)];
		int log_which = l->log_which;

		memcpy(log_name, l->log_name, sizeof(log_name));
		pthread_mutex_unlock(&l->lock);
		tui_data_load(d, tui_now(), &cpu);
		if (log_name[0])
			tui_data_load_log(d, log_name, log_which);
		pthread_mutex_lock(&l->lock);
		if (l->ready) {
			tui_data_free(l->ready);
			free(l->ready);
		}
		l->ready = d;
		(void)!write(l->wake[1], "x", 1);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += TUI_REFRESH_MS / 1000;
		while (!l->asked && !l->quit &&
		       pthread_cond_timedwait(&l->cond, &l->lock, &until) != ETIMEDOUT)
			;
		l->asked = false;
	}
	pthread_mutex_unlock(&l->lock);
	tui_cpu_free(&cpu);
	return NULL;
}

/* Colours where the terminal has them and NO_COLOR is not set; bold and
 * reverse otherwise. */
static bool colours;

static void looks_init(void)
{
	const char *no = getenv("NO_COLOR");

	colours = has_colors() && !(no && *no);
	if (!colours)
		return;
	start_color();
	use_default_colors();
	init_pair(1, COLOR_BLACK, COLOR_CYAN);	/* tabs, status */
	init_pair(2, COLOR_CYAN, -1);		/* header */
	init_pair(3, COLOR_BLACK, COLOR_WHITE); /* selected */
	init_pair(4, COLOR_WHITE, COLOR_RED);	/* error */
}

static attr_t look_attr(enum tui_look l)
{
	switch (l) {
	case TUI_TABS:
	case TUI_STATUS:
		return colours ? COLOR_PAIR(1) : A_REVERSE;
	case TUI_HEADER:
		return A_BOLD | (colours ? COLOR_PAIR(2) : 0);
	case TUI_SELECTED:
		return colours ? COLOR_PAIR(3) : A_REVERSE;
	case TUI_ERROR:
		return A_BOLD | (colours ? COLOR_PAIR(4) : 0);
	default:
		return A_NORMAL;
	}
}

static void draw(const struct tui_state *st, const struct tui_data *d)
{
	struct tui_screen s;
	int h, w;

	getmaxyx(stdscr, h, w);
	tui_render(st, d, w, h, &s);
	for (int y = 0; y < s.height; y++) {
		attrset(look_attr(s.looks[y]));
		/* The last cell of the last line would scroll: leave it. */
		mvaddnstr(y, 0, s.lines[y], y == s.height - 1 ? s.width - 1 : s.width);
	}
	attrset(A_NORMAL);
	tui_screen_free(&s);
	refresh();
}

static int map_key(int ch)
{
	switch (ch) {
	case KEY_DOWN:
		return TUI_KEY_DOWN;
	case KEY_UP:
		return TUI_KEY_UP;
	case KEY_HOME:
		return TUI_KEY_HOME;
	case KEY_END:
		return TUI_KEY_END;
	case KEY_NPAGE:
		return TUI_KEY_NPAGE;
	case KEY_PPAGE:
		return TUI_KEY_PPAGE;
	case KEY_BTAB:
		return TUI_KEY_BTAB;
	case KEY_ENTER:
		return TUI_KEY_ENTER;
	case KEY_BACKSPACE:
		return TUI_KEY_BACKSPACE;
	default:
		return ch;
	}
}

/* The terminal handed to a shell in the sandbox, and taken back. */
static void shell(struct tui_state *st, const char *name)
{
	struct sandbox_stdio io = { .in = STDIN_FILENO,
				    .out = STDOUT_FILENO,
				    .err = STDERR_FILENO,
				    .tty = true,
				    .signal_fd = -1 };
	struct sandbox_process_opts po = { 0 };
	struct agent_result res = { 0 };
	gantry_error_t err = NULL;
	cleanup_free char *safe = tui_cell(name);

	def_prog_mode();
	endwin();
	printf("gantry tui: a shell in %s; exit it to come back\n", safe);
	fflush(stdout);
	if (sandbox_exec(name, &po, &io, NULL, &res, &err) < 0) {
		cleanup_free char *why = tui_cell(gantry_error_str(err));

		snprintf(st->toast, sizeof(st->toast), "error: %s", why);
		gantry_error_free(&err);
	} else {
		snprintf(st->toast, sizeof(st->toast), "the shell in %s ended (status %d)", safe,
			 agent_result_status(&res));
		agent_result_free(&res);
	}
	reset_prog_mode();
	clear();
	refresh();
}

/* A job for the actions' thread, unless one runs. */
static void hand_over(struct loader *l, struct tui_state *st)
{
	char what[200];

	tui_job_describe(&st->job, what, sizeof(what));
	pthread_mutex_lock(&l->lock);
	if (l->busy || l->job.kind != TUI_JOB_NONE) {
		snprintf(st->toast, sizeof(st->toast), "busy: one action at a time");
	} else {
		l->job = st->job;
		snprintf(st->toast, sizeof(st->toast), "%s", what);
		pthread_cond_signal(&l->job_cond);
	}
	pthread_mutex_unlock(&l->lock);
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: gantry tui\n\n"
		     "A terminal dashboard of every sandbox: pages for the sandboxes, their\n"
		     "network traffic, egress rules, shares, ports, secrets (names only),\n"
		     "security events and the snapshots, read again every 2 s. Press ? in it\n"
		     "for the keys. It wants a terminal of 56x8 at least; NO_COLOR turns its\n"
		     "colours off. See docs/tui.md.\n");
}

/* argv: what follows `tui`. */
int tui_main(int argc, char **argv)
{
	struct loader l = { .lock = PTHREAD_MUTEX_INITIALIZER,
			    .cond = PTHREAD_COND_INITIALIZER,
			    .job_cond = PTHREAD_COND_INITIALIZER };
	struct tui_state st = { .page = TUI_SANDBOXES };
	struct tui_data *d = xzalloc(sizeof(*d));
	pthread_t thread, worker;
	bool quit = false;

	if (argc > 0 && (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "-help") == 0 ||
			 strcmp(argv[0], "--help") == 0)) {
		usage(stdout);
		free(d);
		return 0;
	}
	if (argc > 0) {
		log_error("tui: unexpected argument `%.64s` (see gantry tui -help)", argv[0]);
		free(d);
		return 2;
	}
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		log_error("tui: wants a terminal on stdin and stdout");
		free(d);
		return 2;
	}
	if (pipe2(l.wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		log_error("tui: pipe: %s", strerror(errno));
		free(d);
		return 1;
	}
	setlocale(LC_ALL, "");
	initscr();
	cbreak();
	noecho();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	curs_set(0);
	set_escdelay(25);
	mousemask(BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
	mouseinterval(0);
	looks_init();
	if (pthread_create(&thread, NULL, load_loop, &l) != 0) {
		endwin();
		log_error("tui: cannot start its reader");
		free(d);
		return 1;
	}
	if (pthread_create(&worker, NULL, job_loop, &l) != 0) {
		endwin();
		log_error("tui: cannot start its actions' thread");
		l.quit = true;
		pthread_cond_signal(&l.cond);
		pthread_join(thread, NULL);
		free(d);
		return 1;
	}
	draw(&st, d);
	while (!quit) {
		struct pollfd p[2] = { { STDIN_FILENO, POLLIN, 0 }, { l.wake[0], POLLIN, 0 } };
		char drain[64];
		int ch, h = getmaxy(stdscr);

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents) {
			while (read(l.wake[0], drain, sizeof(drain)) > 0)
				;
			pthread_mutex_lock(&l.lock);
			if (l.ready) {
				tui_data_free(d);
				free(d);
				d = l.ready;
				l.ready = NULL;
			}
			if (l.result[0]) {
				snprintf(st.toast, sizeof(st.toast), "%s", l.result);
				l.result[0] = '\0';
			}
			pthread_mutex_unlock(&l.lock);
		}
		while ((ch = getch()) != ERR) {
			enum tui_action a;

			if (ch == KEY_RESIZE) {
				clear();
				continue;
			}
			if (ch == KEY_MOUSE) {
				MEVENT ev;

				if (getmouse(&ev) != OK)
					continue;
				if (ev.bstate & BUTTON1_PRESSED)
					tui_click(&st, d, ev.x, ev.y, getmaxx(stdscr),
						  getmaxy(stdscr));
				else if (ev.bstate & (BUTTON4_PRESSED | BUTTON5_PRESSED))
					tui_wheel(&st, d, ev.bstate & BUTTON4_PRESSED ? -1 : 1,
						  getmaxy(stdscr));
				continue;
			}
			a = tui_key(&st, d, map_key(ch), getmaxy(stdscr));
			if (a == TUI_QUIT) {
				quit = true;
				break;
			}
			if (a == TUI_ACT && st.job.kind == TUI_JOB_SHELL)
				shell(&st, st.job.sandbox);
			else if (a == TUI_ACT)
				hand_over(&l, &st);
			pthread_mutex_lock(&l.lock);
			snprintf(l.log_name, sizeof(l.log_name), "%s", st.logs ? st.log_sandbox : "");
			l.log_which = st.log_which;
			pthread_mutex_unlock(&l.lock);
			if (a == TUI_RELOAD) {
				pthread_mutex_lock(&l.lock);
				l.asked = true;
				pthread_cond_signal(&l.cond);
				pthread_mutex_unlock(&l.lock);
			}
		}
		(void)h;
		draw(&st, d);
	}
	endwin();
	pthread_mutex_lock(&l.lock);
	if (l.busy)
		fprintf(stderr, "gantry tui: waiting for the action under way to finish\n");
	l.quit = true;
	pthread_cond_signal(&l.cond);
	pthread_cond_signal(&l.job_cond);
	pthread_mutex_unlock(&l.lock);
	pthread_join(thread, NULL);
	/* A job under way (a boot) is finished first: it leaves nothing
	 * half made. */
	pthread_join(worker, NULL);
	if (l.ready) {
		tui_data_free(l.ready);
		free(l.ready);
	}
	tui_data_free(d);
	free(d);
	close(l.wake[0]);
	close(l.wake[1]);
	return 0;
}
