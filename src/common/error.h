/* Error objects: every fallible function returns a negative value and fills
 * a struct gantry_error with errno and a message; callers add context on the
 * way up and only the top level prints. Modelled on crun's libcrun_error_t. */
#ifndef GANTRY_COMMON_ERROR_H
#define GANTRY_COMMON_ERROR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

struct gantry_error {
	int status; /* errno, or 0 when the failure has no errno */
	char *msg;
	/* The caller's option whose value was wrong (gantry_error_opt), by
	 * the library's name for it, or NULL; option_tail: how far from the
	 * end of msg its name starts (prefixes leave that as it is). */
	const char *option;
	size_t option_tail;
	bool option_named; /* by the front end's namer, already */
	/* The caller's input was wrong (a value, a name, a spec), as with
	 * an option's (option set): a front end's usage error. */
	bool usage;
	/* Well-formed input that conflicts with what exists (a share's tag
	 * taken on the sandbox): the operation failed, usage or not. */
	bool conflict;
};

typedef struct gantry_error *gantry_error_t;

/* Fill *err (if err is non-NULL and empty) and return -1. */
int gantry_error(gantry_error_t *err, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Same as gantry_error with status = errno. */
int gantry_error_errno(gantry_error_t *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* gantry_error for input of the caller's that is wrong (usage set). */
int gantry_error_usage(gantry_error_t *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The error already in *err becomes one about the caller's input. -1. */
int gantry_error_as_usage(gantry_error_t *err);
/* The error already in *err is a conflict with what exists. -1. */
int gantry_error_as_conflict(gantry_error_t *err);
/* Whether err is about the caller's input: usage, or an option's value,
 * and no conflict. */
bool gantry_error_is_usage(gantry_error_t err);
/* An error in the value of the caller's option: its library name
 * (option, a static string: a field of struct sandbox_opts, say "cpus")
 * starts the message, followed by fmt's text (" 300: this host allows 1 to
 * 8"). A front end reads err->option to point at its own input, and may
 * have the name shown its own way (gantry_error_set_namer). */
int gantry_error_opt(gantry_error_t *err, const char *option, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* gantry_error_prefix's "<option><fmt>: " before an error about the
 * option's value (a parser's), which then names it as gantry_error_opt
 * does. */
int gantry_error_prefix_opt(gantry_error_t *err, const char *option, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* How the process's front end names the library's options in messages
 * (the CLI: "cpus" is "-cpus"); namer returns NULL for a name it does not
 * know (shown as it is). Set once, before any thread; NULL: as they are. */
void gantry_error_set_namer(const char *(*namer)(const char *option));
/* Prefix "<context>: " to an existing error; returns -1. */
int gantry_error_prefix(gantry_error_t *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Make the message safe to show, for one that quotes untrusted text (a
 * name from an image, a registry's words): text_sanitize (common/text.h),
 * cut to max bytes (0: no limit). Returns -1. */
int gantry_error_sanitize(gantry_error_t *err, size_t max);
/* "msg" or "msg: strerror(status)" (but "msg" alone for ECANCELED, whose
 * status it keeps); the string lives as long as the error. */
const char *gantry_error_str(gantry_error_t err);
void gantry_error_free(gantry_error_t *err);
/* Print "gantry: <msg>" on stderr and free the error. */
void gantry_error_print(gantry_error_t *err);

#endif
