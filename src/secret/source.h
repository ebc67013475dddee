/* Inside src/secret/ only: reading a secret's source, with no lock held
 * and nothing of the store touched. Each reads into buf (SECRET_VALUE_MAX
 * + 1 bytes of the secret arena) and gives the value's length, one
 * trailing newline dropped, or -1 (err names the secret, never a value). */
#ifndef GANTRY_SECRET_SOURCE_H
#define GANTRY_SECRET_SOURCE_H

#include <sys/types.h>

#include "common/error.h"
#include "secret/spec.h"

/* =@PATH: a regular file of at most SECRET_VALUE_MAX bytes. */
ssize_t secret_read_file(const struct secret_spec *sp, char *buf, gantry_error_t *err);
/* ='!ARGV': run without a shell, its stdout the value, at most
 * SECRET_VALUE_MAX bytes, exit status 0, all within SECRET_CMD_TIMEOUT_MS. */
ssize_t secret_run_cmd(const struct secret_spec *sp, char *buf, gantry_error_t *err);

#endif
