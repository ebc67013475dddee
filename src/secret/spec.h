/* A secret's spec, as -secret gives it (the Go original's grammar):
 *
 *   NAME[@HOST[,HOST...]][=@/PATH | ='!ARGV0 ARG...'][,OPTION...]
 *
 * OPTION: ttl=DUR, inject, header=NAME, format=TEXT (in any order, after
 * everything else).
 *
 * NAME is [A-Za-z_][A-Za-z0-9_]*. Without a source the value is NAME's
 * in the caller's environment, taken once; =@PATH reads a file and ='!...'
 * runs a command (its argv split at white space, no shell), each when the
 * value is used and again once ttl has passed (DUR as Go writes a
 * duration: 90s, 1m30s, 0 for every use). NAME=VALUE is refused: a value
 * in argv is one every user of the host can read in /proc. @HOST binds
 * the secret to hosts: it is then not put in the environment, and the
 * guest's git credential helper gets it for those hosts. With inject (or
 * header= or format=, which imply it) it is injected at egress instead:
 * the environment holds a placeholder, which Gantry replaces with the
 * value in the headers of HTTPS requests to those hosts (header=: only in
 * that header; format=: the header, with %s the value, added to requests
 * that lack it). The value then never enters the guest.
 *
 * -secret-file FILE holds NAME=VALUE lines (a dotenv): # comments, blank
 * lines and CRs skipped, one pair of quotes around a value taken off. */
#ifndef GANTRY_SECRET_SPEC_H
#define GANTRY_SECRET_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SECRET_NAME_MAX	  128
#define SECRET_HOST_MAX	  253
#define SECRET_HOSTS_MAX  16
#define SECRET_ARGV_MAX	  64
#define SECRET_SPEC_MAX	  4096
#define SECRET_HEADER_MAX 64
#define SECRET_TTL_MAX_MS (366LL * 24 * 3600 * 1000)

enum secret_source {
	SECRET_FROM_ENV,  /* the caller's environment, once */
	SECRET_FROM_FILE, /* =@PATH */
	SECRET_FROM_CMD,  /* ='!ARGV' */
	SECRET_FROM_VALUE /* a -secret-file line, or a live set */
};

struct secret_spec {
	char name[SECRET_NAME_MAX + 1];
	char *hosts[SECRET_HOSTS_MAX + 1]; /* NULL-terminated; none: an env secret */
	size_t nr_hosts;
	enum secret_source source;
	char *path;	/* SECRET_FROM_FILE: absolute */
	char **argv;	/* SECRET_FROM_CMD: NULL-terminated */
	int64_t ttl_ms; /* -1: the source's default */
	bool inject;	/* injected at egress: the guest holds a placeholder */
	char *header;	/* inject: only in this header (NULL: any) */
	char *format;	/* inject: the header added when absent ("Bearer %s") */
};

bool secret_name_valid(const char *name, size_t len);
/* Parse spec into *out (zeroed first; free it with secret_spec_free). The
 * error never quotes what follows a '=' that is not a source: that may be
 * a value typed by mistake. */
int secret_spec_parse(const char *spec, struct secret_spec *out, gantry_error_t *err);
void secret_spec_free(struct secret_spec *s);
/* The spec as a string that parses back to it, with no value in it (what a
 * sandbox keeps). */
char *secret_spec_format(const struct secret_spec *s);
/* What a source is called where names are shown (sandbox.json keeps a
 * -secret-file value's as "env": a resume takes it from there). */
const char *secret_source_name(enum secret_source source);
/* How long the name at the start of a spec is. */
size_t secret_spec_name_len(const char *spec);
/* A Go duration ("1h2m3.5s", "0"): 0 with *ms, -1 when it is not one. */
int secret_ttl_parse(const char *s, size_t len, int64_t *ms);

/* A dotenv's lines: each NAME and VALUE (not NUL-terminated: value may hold
 * anything but a newline) to fn, in order; fn returning < 0 stops the walk
 * with its status. Errors name the line, never its value. */
int secret_dotenv_parse(const char *buf, size_t len,
			int (*fn)(void *opaque, const char *name, size_t name_len,
				  const char *value, size_t value_len, gantry_error_t *err),
			void *opaque, gantry_error_t *err);

#endif
