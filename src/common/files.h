/* Gantry's state directory and files written whole: $GANTRY_HOME, else
 * ~/.gantry, and writes that a reader sees all of or none of. */
#ifndef GANTRY_COMMON_FILES_H
#define GANTRY_COMMON_FILES_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"

/* $GANTRY_HOME, else $HOME/.gantry (the passwd entry's home without
 * HOME); not created. *out is malloc()ed. */
int gantry_home(char **out, gantry_error_t *err);
/* mkdir -p with mode 0700 for every directory it creates. */
int mkdir_p(const char *path, gantry_error_t *err);
/* Write path atomically with mode: temp file beside it, fsync, rename,
 * fsync the directory. No temporary file is left on failure. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode,
		      gantry_error_t *err);
/* Create path (it must not exist) holding data, not synced: for a file in
 * a directory not yet renamed into place. */
int write_file_new(const char *path, const void *data, size_t len, mode_t mode,
		   gantry_error_t *err);
/* Open path (relative to dfd, AT_FDCWD or a directory's fd) with flags
 * only if it is a regular file, *st its stat: without blocking on a FIFO
 * (O_NONBLOCK for the open, cleared after), never a terminal. The fd; -1
 * with errno when open, fstat or fcntl fail; -2 when it is no regular
 * file (closed). */
int open_regular_at(int dfd, const char *path, int flags, struct stat *st);
/* Read a whole regular file of at most max bytes, NUL-terminated; 0 with
 * *out NULL when it does not exist. */
int read_file_max(const char *path, size_t max, char **out, size_t *len, gantry_error_t *err);
/* The last (at most max) lines of a log, for showing in a terminal or an
 * error, from at most its last FILES_TAIL_WINDOW bytes: a guest's console
 * may be huge, or one line without end. Line ends are dropped, each line is
 * sanitised (text_sanitize) and a line longer than FILES_TAIL_LINE_MAX
 * keeps only its end, after "...". Returns how many (0 when it is missing,
 * empty or not a regular file); free them with free_lines(). */
#define FILES_TAIL_WINDOW   (64 * 1024)
#define FILES_TAIL_LINE_MAX 512
size_t read_tail_lines(const char *path, size_t max, char ***out);
void free_lines(char **lines, size_t n);
/* Add "\n<header>" and path's last (at most max) lines, each as "\n  <line>",
 * to *err's message: for an error that points at a log about to go, or
 * one the user would look in next. Nothing when the log has no lines. */
void error_add_tail(gantry_error_t *err, const char *path, size_t max, const char *header);
/* A small file whose size stat does not tell (a /proc one) into buf,
 * NUL-terminated, at most cap - 1 bytes of it: their count, or -1. */
ssize_t read_small(const char *path, char *buf, size_t cap);
/* Process pid's start time (/proc/PID/stat field 22: clock ticks since
 * the boot) and state letter (field 3, 'Z' for a zombie): 0, or -1 when
 * it is gone or the file does not read. */
int proc_start(pid_t pid, unsigned long long *ticks, char *state);
/* The process's umask, read without changing it (threads may be making
 * files meanwhile); 022 when /proc cannot say. */
mode_t process_umask(void);
/* The first file called name in a directory of $PATH (an empty entry is
 * the current directory; no PATH: /bin:/usr/bin), allocated; NULL when
 * there is none. */
char *path_find(const char *name);
/* Remove path and everything below it, not following symlinks; best effort. */
void rm_tree(const char *path);

#endif
