/* The credential broker's protocol (proto/agent.h, PROTO_BROKER_PORT):
 * git's credential description from the container's helper, and the
 * answer to it, shared by a sandbox's supervisor and a one-shot exec,
 * each of which adds its own gates (the egress policy) and its own loop.
 * Guest bytes: every field is bounded and checked before use. */
#ifndef GANTRY_SECRET_BROKER_H
#define GANTRY_SECRET_BROKER_H

#include <stdbool.h>
#include <stddef.h>

#include "secret/spec.h"
#include "secret/store.h"

#define BROKER_REQUEST_MAX 4096
#define BROKER_WAIT_MS	   15000 /* for a connection's request and answer: a command may take 10 s */

/* A session's environment where host-bound secrets are served: git asks
 * the helper, and no helper the image or the user configured (one that
 * stores would keep the value on the guest's disk). NULL-terminated. */
extern char *const broker_git_env[];

struct broker_req {
	char proto[16];
	char host[SECRET_HOST_MAX + 1]; /* a DNS name, lowercase, its port dropped */
	char user[256];			/* the URL's, or the one git hosts take with a token */
};

/* Whether the request so far (NUL-terminated, len bytes) is whole: it
 * ends with a blank line. */
bool broker_request_whole(const char *in, size_t len);
/* Parse a whole request: 0, or -1 with *why (a fixed reason). */
int broker_parse(const char *in, struct broker_req *r, const char **why);

/* An answer, in the secret arena (zeroed when freed). */
struct broker_out {
	char *text;
	size_t len, size;
};
/* username= and password= for v; -1 with *why when v's value cannot be
 * said (a line break in it), or NULL text when the arena is full. */
int broker_answer(const struct broker_req *r, const struct secret_value *v, struct broker_out *o,
		  const char **why);
/* error=WHY. */
void broker_refusal(struct broker_out *o, const char *why);
void broker_out_free(struct broker_out *o);

#endif
