/* One EXEC's state, shared by the three files that run it: session.c (the
 * table of sessions, EXEC, STARTED and EXIT), crun.c (crun's command lines,
 * its log and pid file, the terminal it hands over) and relay.c (the
 * session's stdio over its own vsock stream). session.c calls the other
 * two; they call neither it nor each other. Private to gantry-init. */
#ifndef GANTRY_GUEST_SESSION_H
#define GANTRY_GUEST_SESSION_H

#include <fcntl.h>
#include <unistd.h>

#include "common/util.h"
#include "guest/guest.h"

struct session {
	uint32_t id;
	bool tty;
	pid_t crun;  /* `crun run -d` while it runs */
	pid_t pid;   /* the container's process, once crun said */
	bool exited; /* and status holds its wait status */
	bool init;   /* PROTO_EXEC_INIT: its end ends the container */
	int status;
	uint32_t pending_signal;
	uint32_t rows, cols;
	char bundle[GUEST_PATH_MAX];
	char name[32];

	int stream; /* -1 once the host side is gone */
	struct proto_decoder *dec;
	int console; /* tty: listening socket crun sends the pty master to */
	int master;  /* tty: the pty master, which is also in_w and out_r */
	int in_w;    /* container stdin; -1 once closed */
	int out_r, err_r;
	bool in_eof; /* close in_w once in_buf is written */
	uint8_t in_buf[PROTO_MAX_DATA];
	size_t in_len, in_off;
	uint8_t out_buf[PROTO_HDR_SIZE + PROTO_MAX_DATA];
	size_t out_len, out_off;
	bool next_err; /* read stderr first next time, for fairness */
};

static inline void set_nonblock(int fd)
{
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* crun.c */

/* Start s's process: `crun run --detach` of its bundle, or with persist a
 * `crun exec --detach` into the long-lived container; its stdio on pipes,
 * or with a tty on the console socket. 0, or -1 and *why. */
int crun_start(const struct guest *g, struct session *s, char **why);
/* crun's last log line in s's bundle, which says why it failed (malloc'd). */
char *crun_reason(const struct session *s);
/* The pid crun wrote to <bundle>/pid, or 0. */
long crun_pid(const char *bundle);
/* The pty master crun sends on s's console socket, or -1 with errno. */
int crun_receive_master(struct session *s);
/* Remove crun's state for s's container, in the background. */
void crun_delete(const struct guest *g, const struct session *s);

/* relay.c */

/* The host end of the stream is gone: drop what is queued for it, and end
 * the process's stdin. */
void relay_stream_gone(struct session *s);
/* Write what is held of stdin into the process, as far as it takes it. */
void relay_pump_stdin(struct session *s);
/* Frames from the host, as long as stdin can take them. */
void relay_take_frames(struct session *s);

#endif
