/* Error objects (see error.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"

static int error_vmake(gantry_error_t *err, int status, const char *fmt, va_list ap)
{
	struct gantry_error *e;

	if (err == NULL || *err != NULL)
		return -1;
	e = xzalloc(sizeof(*e));
	e->status = status;
	if (vasprintf(&e->msg, fmt, ap) < 0)
		abort();
	*err = e;
	return -1;
}

int gantry_error_usage(gantry_error_t *err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vmake(err, 0, fmt, ap);
	va_end(ap);
	return gantry_error_as_usage(err);
}

int gantry_error_as_usage(gantry_error_t *err)
{
	if (err && *err)
		(*err)->usage = true;
	return -1;
}

int gantry_error_as_conflict(gantry_error_t *err)
{
	if (err && *err)
		(*err)->conflict = true;
	return -1;
}

bool gantry_error_is_usage(gantry_error_t err)
{
	return err && !err->conflict && (err->usage || err->option);
}

int gantry_error(gantry_error_t *err, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vmake(err, status, fmt, ap);
	va_end(ap);
	return -1;
}

/* e->msg becomes "<option><what><sep><msg>", its option named there. */
static int option_first(struct gantry_error *e, const char *option, const char *what,
			const char *sep)
{
	char *msg;

	xasprintf(&msg, "%s%s%s%s", option, what, sep, e->msg);
	free(e->msg);
	e->msg = msg;
	e->option = option;
	e->option_tail = strlen(msg);
	e->option_named = false;
	return -1;
}

int gantry_error_opt(gantry_error_t *err, const char *option, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || *err != NULL)
		return -1;
	va_start(ap, fmt);
	error_vmake(err, 0, fmt, ap);
	va_end(ap);
	return option_first(*err, option, "", "");
}

int gantry_error_prefix_opt(gantry_error_t *err, const char *option, const char *fmt, ...)
{
	cleanup_free char *what = NULL;
	va_list ap;

	if (err == NULL || *err == NULL)
		return -1;
	va_start(ap, fmt);
	if (vasprintf(&what, fmt, ap) < 0)
		abort();
	va_end(ap);
	return option_first(*err, option, what, ": ");
}

static const char *(*option_namer)(const char *option);

void gantry_error_set_namer(const char *(*namer)(const char *option))
{
	option_namer = namer;
}

/* The option's name in msg as the front end calls it, once. */
static void name_option(struct gantry_error *e)
{
	size_t len = strlen(e->msg), olen;
	const char *shown;
	char *msg;

	if (e->option == NULL || e->option_named || option_namer == NULL || e->option_tail > len)
		return;
	olen = strlen(e->option);
	shown = option_namer(e->option);
	if (shown == NULL || strncmp(e->msg + len - e->option_tail, e->option, olen) != 0)
		return;
	xasprintf(&msg, "%.*s%s%s", (int)(len - e->option_tail), e->msg, shown,
		  e->msg + len - e->option_tail + olen);
	free(e->msg);
	e->msg = msg;
	e->option_tail = e->option_tail - olen + strlen(shown);
	e->option_named = true;
}

int gantry_error_errno(gantry_error_t *err, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	error_vmake(err, saved, fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

int gantry_error_prefix(gantry_error_t *err, const char *fmt, ...)
{
	char *prefix, *msg;
	va_list ap;

	if (err == NULL || *err == NULL)
		return -1;
	va_start(ap, fmt);
	if (vasprintf(&prefix, fmt, ap) < 0)
		abort();
	va_end(ap);
	xasprintf(&msg, "%s: %s", prefix, (*err)->msg);
	free(prefix);
	free((*err)->msg);
	(*err)->msg = msg;
	return -1;
}

int gantry_error_sanitize(gantry_error_t *err, size_t max)
{
	if (err && *err && (*err)->msg)
		text_sanitize((*err)->msg, max);
	return -1;
}

const char *gantry_error_str(gantry_error_t err)
{
	char *full;

	if (err == NULL)
		return "unknown error";
	name_option(err);
	/* A cancel's message says it all ("cancelled"); its status stays for
	 * the caller to tell it from a failure. */
	if (err->status == 0 || err->status == ECANCELED)
		return err->msg;
	xasprintf(&full, "%s: %s", err->msg, strerror(err->status));
	err->option_tail += strlen(full) - strlen(err->msg);
	free(err->msg);
	err->msg = full;
	err->status = 0;
	return err->msg;
}

void gantry_error_free(gantry_error_t *err)
{
	if (err == NULL || *err == NULL)
		return;
	free((*err)->msg);
	free(*err);
	*err = NULL;
}

void gantry_error_print(gantry_error_t *err)
{
	log_error("%s", gantry_error_str(err ? *err : NULL));
	gantry_error_free(err);
}
