/* Files in a running container, without the image's tools: gantry-init,
 * bound into every container at PROTO_HELPER_PATH, is also a file helper
 * that the host runs as a session (an EXEC like any other, so the
 * container's user, namespaces, capabilities and seccomp apply to it):
 *
 *   PROTO_HELPER_PATH files VERSION OP ARGS...
 *
 * VERSION is PROTO_FILES_VERSION; a helper that does not speak it exits
 * PROTO_FILES_USAGE. Paths are absolute and at most PROTO_FILES_PATH_MAX
 * bytes; they are the container's own (a link in them leads where it
 * leads the container's processes). The ops:
 *
 *   stat DEPTH PATH  DEPTH 0: PATH's own entry (a link is not followed).
 *                    DEPTH 1..PROTO_FILES_DEPTH_MAX: the entries below the
 *                    directory PATH (followed if it is a link), DEPTH
 *                    levels down, links below it not followed; what is
 *                    below a directory it may not read is left out.
 *   read PATH        a regular file's bytes on stdout (anything else is
 *                    refused, as is a FIFO: nothing blocks on one).
 *   write PATH       stdin into PATH, a regular file made (0666 less the
 *                    umask) or truncated (anything else is refused), its
 *                    missing parents made (0777 less the umask); then
 *                    PATH's entry.
 *   mkdir PATH       PATH and its missing parents; PROTO_FILES_EXIST if
 *                    PATH is there already; then PATH's entry.
 *   remove PATH      PATH and all below it; no error if it is not there.
 *   move FROM TO     rename(2), TO's missing parents made; then TO's entry.
 *   ps               the container's processes (its PID namespace's), the
 *                    helper itself left out.
 *   watch REC PATH   changes below the directory PATH (REC 1: in every
 *                    directory below it too, made later or not, 64 levels
 *                    down at most): a 'y' record once it watches, then a
 *                    'w' record for each change, each written at once,
 *                    until it is killed, or PATH goes (PROTO_FILES_NOENT).
 *
 * Records on stdout (stat, write, mkdir, move), each a line of fields
 * separated by one space, then the path's bytes and a newline:
 *
 *   e TYPE SIZE MODE MTIME UID GID OWNER GROUP LEN\nPATH\n
 *       TYPE f (regular), d, l (link), o (anything else); SIZE, MTIME
 *       (seconds since the epoch, may be negative), UID and GID decimal;
 *       MODE octal, at most 07777; OWNER and GROUP the container's names
 *       for UID and GID (1-32 of [A-Za-z0-9._-]), or "-" for none.
 *   x LEN\nPATH\n    (stat) PATH is not there.
 *   n LEN\nPATH\n    (stat, DEPTH > 0) PATH is there but no directory.
 *   p PID PPID UID STATE RSS LEN\nARGS\n
 *       (ps) a process: PID and PPID in the container's namespace, UID,
 *       STATE one letter of [A-Za-z] as /proc says it (R, S, D, Z...),
 *       RSS in KiB, ARGS its command line, arguments separated by a space
 *       (or its name in brackets when it has none, as a kernel thread).
 *   y LEN\nPATH\n    (watch) PATH is watched from now on.
 *   w TYPE LEN\nNAME\n
 *       (watch) a change: TYPE c (made, or moved in), w (written), r
 *       (removed), m (moved away), a (its attributes changed); NAME its
 *       path below the watched directory.
 *
 * LEN is the path's (or ARGS') length, 1..PROTO_FILES_PATH_MAX; it holds
 * no NUL and may hold anything else, newlines included. A helper that fails
 * exits with one of the PROTO_FILES_* statuses below and says why in one
 * line on stderr; what it wrote on stdout before then is not an answer.
 *
 * The host reads the records with files_next() (files.c), which takes
 * them as a guest's words: bounded, exact, and fuzzed (fuzz_files). */
#ifndef GANTRY_PROTO_FILES_H
#define GANTRY_PROTO_FILES_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_FILES_ARG	      "files"
#define PROTO_FILES_VERSION   "1" /* the helper's argument */
#define PROTO_FILES_PATH_MAX  4096
#define PROTO_FILES_DEPTH_MAX 32
#define PROTO_FILES_NAME_MAX  32 /* an owner's or group's name */

/* How a helper ends. */
#define PROTO_FILES_OK	    0
#define PROTO_FILES_FAILED  1 /* anything not below (EIO, EXDEV, ...) */
#define PROTO_FILES_NOENT   2 /* the path, or a directory in it, is not there */
#define PROTO_FILES_DENIED  3 /* EACCES, EPERM, EROFS */
#define PROTO_FILES_EXIST   4
#define PROTO_FILES_NOTDIR  5 /* a directory was wanted (a file on the way to one made) */
#define PROTO_FILES_ISDIR   6 /* a file was wanted */
#define PROTO_FILES_NOSPACE 7 /* ENOSPC, EDQUOT */
#define PROTO_FILES_USAGE   8 /* an op, a version or an argument it does not take */

/* The status for errno e. */
static inline int proto_files_status(int e)
{
	switch (e) {
	case 0:
		return PROTO_FILES_OK;
	case ENOENT:
	case ENOTDIR:
		return PROTO_FILES_NOENT;
	case EACCES:
	case EPERM:
	case EROFS:
		return PROTO_FILES_DENIED;
	case EEXIST:
	case ENOTEMPTY:
		return PROTO_FILES_EXIST;
	case EISDIR:
		return PROTO_FILES_ISDIR;
	case ENOSPC:
	case EDQUOT:
		return PROTO_FILES_NOSPACE;
	case EINVAL:
	case ENAMETOOLONG:
		return PROTO_FILES_USAGE;
	default:
		return PROTO_FILES_FAILED;
	}
}

/* One record. path points into the buffer it was read from (not
 * NUL-terminated: path_len bytes, none of them NUL); for 'p' it is ARGS. */
struct files_record {
	char kind; /* 'e', 'x', 'n', 'p', 'y' or 'w' */
	char type; /* 'e': 'f', 'd', 'l' or 'o'; 'w': 'c', 'w', 'r', 'm' or 'a' */
	uint64_t size;
	uint32_t mode;
	int64_t mtime;
	uint32_t uid, gid;
	uint32_t pid, ppid; /* 'p', with uid, state and rss_kib */
	char state;
	uint64_t rss_kib;
	char owner[PROTO_FILES_NAME_MAX + 1], group[PROTO_FILES_NAME_MAX + 1]; /* "" for "-" */
	const char *path;
	size_t path_len;
};

/* The record at *off in buf[0..len): 1 with *rec filled and *off past it,
 * 0 at the end of buf, -1 when what is there is not a whole, well-formed
 * record (*why says what; the rest of buf is then no answer). */
int files_next(const char *buf, size_t len, size_t *off, struct files_record *rec,
	       const char **why);
/* For a stream read as it comes: the length of the first record in
 * buf[0..len) once all of it is there, 0 while it is not, -1 when what is
 * there can be no record's start (then files_next says why). */
ssize_t files_record_len(const char *buf, size_t len);

#endif
