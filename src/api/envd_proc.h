/* The processes of envd's process service (envd.c): each runs through
 * the backend's exec on a thread of its own (envd_proc_thread), and a pump
 * thread (envd_pump) reads its output into events that every stream
 * following it (envd_follow: its Start's, any Connect's) sends in turn.
 * Everything shared is under the E2B state's lock (e2b.h); a process is
 * freed with its last reference (the pump's and each stream's). */
#ifndef GANTRY_API_ENVD_PROC_H
#define GANTRY_API_ENVD_PROC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "api/e2b.h"

#define ENVD_CHUNK   49152 /* output bytes in one data event */
#define ENVD_EVENTS  16	   /* events a process holds for a stream behind */
#define ENVD_FOLLOW  8	   /* streams following one process */
#define ENVD_WAIT_MS 250   /* a stream's look at its client while it waits */
#define ENVD_TTY_MAX 1000  /* a terminal's rows and columns */

struct e2b_event {
	const char *key; /* "stdout", "stderr" or "pty" */
	char *data;
	size_t len;
};

struct e2b_sub;

struct e2b_proc {
	struct api_server *s;
	uint32_t pid;
	char box[65];
	json_t *config; /* {cmd, args, envs, cwd}, as List shows it */
	char *tag;
	char **argv, **env;
	struct api_exec x;
	/* Ours: its output, its stdin, its signals; its terminal's master
	 * (pty.size), or -1. */
	int out_r, err_r, in_w, sig_w, pty;
	/* Its own, closed by its thread when the exec returns. */
	int in_r, out_w, err_w, sig_r;
	pthread_t thread, pump;
	struct gantry_cancel cancel;
	int ret;
	struct api_exec_result res;
	gantry_error_t err;
	/* Under e->lock from here on. */
	uint64_t deadline, hangup_at; /* hangup_at: 0 until a SIGKILL */
	bool killed, hung_up, timed_out;
	pthread_cond_t cond; /* an event, its end, or a stream gone */
	struct e2b_event events[ENVD_EVENTS];
	uint64_t first, next; /* the events held: [first, next) */
	struct e2b_sub *subs[ENVD_FOLLOW];
	bool ended;    /* end is its last event */
	json_t *end;   /* the end event's body */
	unsigned refs; /* the pump and each stream */
	bool running;  /* its threads started: List, Connect and the rest see it */
};

/* A stream following a process: its Start's or a Connect's. */
struct e2b_sub {
	struct api_stream stream; /* first: the reply's stream is this */
	struct e2b_proc *p;
	uint64_t next; /* the next event it sends */
	uint64_t keepalive;
	int conn_fd; /* its client's connection */
	bool started, ended, trailed;
	char *pending; /* an envelope not sent whole yet */
	size_t pending_len, pending_off;
};

/* The backend's exec of p, its ends closed when it returns. */
void *envd_proc_thread(void *arg);
/* p's output to its end, then its end event; drops the pump's reference. */
void *envd_pump(void *arg);
/* A signal through p's session; SIGKILL has it hung up API_KILL_GRACE_MS
 * later if it lives on. Under e->lock. */
void envd_proc_kill(struct e2b_proc *p, int signo);
void envd_proc_free(struct e2b_proc *p);
/* A stream following p from its next event, under e->lock; NULL when p
 * has ENVD_FOLLOW already, or the server E2B_STREAMS_MAX. */
struct e2b_sub *envd_follow(struct e2b_proc *p, int conn_fd);
/* Pipes for p's stdin, stdout and stderr, or a terminal (rows > 0); and
 * its signals' pipe. */
bool envd_pipes(struct e2b_proc *p, unsigned rows, unsigned cols);

#endif
