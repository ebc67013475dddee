/* One command run to its end through the backend's exec, for the calls
 * that answer only once it is over: /v1's exec (exec.c) and envd's files
 * (envd_fs.c). The exec runs on a thread of its own; the caller's thread
 * feeds its stdin from a buffer, gathers its output up to a bound, and
 * ends it (SIGKILL through its session, then a hang-up API_KILL_GRACE_MS
 * later) at its deadline, past the bound, when its client hangs up, or
 * at the server's end. The caller takes and gives back the exec slot. */
#ifndef GANTRY_API_JOB_H
#define GANTRY_API_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api_priv.h"

enum api_job_end {
	API_JOB_DONE,	  /* it ended of itself: ret, res and err say how */
	API_JOB_TIMEOUT,  /* killed at its deadline */
	API_JOB_OVER,	  /* killed for output past max */
	API_JOB_GONE,	  /* killed: its client hung up */
	API_JOB_STOPPING, /* killed: the server is stopping */
};

struct api_job {
	/* In. */
	const char *name; /* the sandbox */
	struct api_exec x;
	const void *in; /* stdin, in_len bytes; then EOF */
	size_t in_len;
	bool merge;	   /* stderr into out, as it comes, as a terminal shows it */
	size_t max;	   /* bytes of out (and of err) kept; more is API_JOB_OVER */
	uint64_t deadline; /* now_ms() */
	int conn_fd;	   /* the client's connection, or -1 */
	/* Out: what came, each NUL-terminated (NULL when nothing did). */
	char *out, *err;
	size_t out_len, err_len;
	enum api_job_end end;
	int ret; /* the exec's: -1 with e */
	struct api_exec_result res;
	gantry_error_t e;
};

/* Run j to its end: 0 with j's out fields filled, or -1 (err) when it
 * could not start (a pipe, a thread). */
int api_job_run(struct api_server *s, struct api_job *j, gantry_error_t *err);
void api_job_free(struct api_job *j);

#endif
