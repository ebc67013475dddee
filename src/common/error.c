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

int gantry_error(gantry_error_t *err, int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	error_vmake(err, status, fmt, ap);
	va_end(ap);
	return -1;
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
	/* A cancel's message says it all ("cancelled"); its status stays for
	 * the caller to tell it from a failure. */
	if (err->status == 0 || err->status == ECANCELED)
		return err->msg;
	xasprintf(&full, "%s: %s", err->msg, strerror(err->status));
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
