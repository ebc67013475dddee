/* A saved VM's files (see files.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "snapshot/files.h"

/* A save's or a restore's file: a regular file, and one made anew for a
 * save (what was there, anybody's file or link, goes first); a FIFO
 * would block the open for good. */
static int snap_open(int dir, const char *path, const char *name, int flags, gantry_error_t *err)
{
	struct stat st;
	int fd;

	if (flags & O_CREAT) {
		if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
			return gantry_error_errno(err, "%s/%s", path, name);
		flags = (flags & ~O_TRUNC) | O_EXCL;
	}
	fd = open_regular_at(dir, name, flags | O_NOFOLLOW, &st);
	if (fd == -2)
		return gantry_error(err, 0, "%s/%s is not a file", path, name);
	if (fd < 0)
		return gantry_error_errno(err, "%s/%s", path, name);
	return fd;
}

bool snap_exists(const char *path)
{
	cleanup_close int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	return dir >= 0 && fstatat(dir, SNAP_STATE, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

int snap_open_restore(const char *path, int *state_fd, int *mem_fd, gantry_error_t *err)
{
	cleanup_close int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*state_fd = *mem_fd = -1;
	if (dir < 0)
		return gantry_error_errno(err, "%s", path);
	if ((*state_fd = snap_open(dir, path, SNAP_STATE, O_RDONLY, err)) < 0)
		return -1;
	if ((*mem_fd = snap_open(dir, path, SNAP_MEMORY, O_RDONLY, err)) < 0) {
		close(*state_fd);
		*state_fd = -1;
		return -1;
	}
	return 0;
}

int snap_open_save(struct snap_save *s, const char *path, gantry_error_t *err)
{
	*s = (struct snap_save){ .path = path, .dir = -1, .state_fd = -1, .mem_fd = -1 };
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return gantry_error_errno(err, "%s", path);
	s->dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (s->dir < 0)
		return gantry_error_errno(err, "%s", path);
	if ((s->state_fd = snap_open(s->dir, path, SNAP_STATE_NEW, O_RDWR | O_CREAT | O_TRUNC,
				     err)) < 0 ||
	    (s->mem_fd = snap_open(s->dir, path, SNAP_MEMORY_NEW, O_RDWR | O_CREAT | O_TRUNC,
				   err)) < 0)
		return -1;
	return 0;
}

int snap_finish(struct snap_save *s, bool ok, gantry_error_t *err)
{
	struct stat st;
	int r = 0;

	if (s->dir >= 0 && ok && fstat(s->state_fd, &st) == 0 && st.st_size > 0) {
		/* The memory first: a state file in place says its memory is. */
		if (renameat(s->dir, SNAP_MEMORY_NEW, s->dir, SNAP_MEMORY) < 0 ||
		    renameat(s->dir, SNAP_STATE_NEW, s->dir, SNAP_STATE) < 0)
			r = gantry_error_errno(err, "%s", s->path);
		else
			r = 1;
	} else if (s->dir >= 0) {
		unlinkat(s->dir, SNAP_STATE_NEW, 0);
		unlinkat(s->dir, SNAP_MEMORY_NEW, 0);
	}
	if (s->dir >= 0)
		close(s->dir);
	if (s->state_fd >= 0)
		close(s->state_fd);
	if (s->mem_fd >= 0)
		close(s->mem_fd);
	s->dir = s->state_fd = s->mem_fd = -1;
	return r;
}

void snap_remove(const char *path)
{
	cleanup_close int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (dir < 0)
		return;
	/* The state first: memory without a state file is no save. */
	unlinkat(dir, SNAP_STATE, 0);
	unlinkat(dir, SNAP_MEMORY, 0);
	unlinkat(dir, SNAP_ORIGIN, 0);
	rmdir(path);
}

#define SNAP_STATE_NEXT	 ".state.next"
#define SNAP_MEMORY_NEXT ".memory.next"

int snap_take(struct snap_save *s, const char *to, int *state_fd, int *mem_fd,
	      gantry_error_t *err)
{
	cleanup_close int dir = open(to, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = -1;

	*state_fd = *mem_fd = -1;
	if (dir < 0)
		return gantry_error_errno(err, "%s", to);
	if ((*state_fd = snap_open(s->dir, s->path, SNAP_STATE_NEXT, O_RDWR | O_CREAT | O_TRUNC,
				   err)) < 0 ||
	    (*mem_fd = snap_open(s->dir, s->path, SNAP_MEMORY_NEXT, O_RDWR | O_CREAT | O_TRUNC,
				 err)) < 0)
		goto out;
	/* The memory first: a state file in place says its memory is. */
	if (renameat(s->dir, SNAP_MEMORY_NEW, dir, SNAP_MEMORY) < 0) {
		if (errno == EXDEV)
			r = 0;
		else
			gantry_error_errno(err, "%s/%s", to, SNAP_MEMORY);
		goto out;
	}
	if (renameat(s->dir, SNAP_STATE_NEW, dir, SNAP_STATE) < 0) {
		gantry_error_errno(err, "%s/%s", to, SNAP_STATE);
		/* The save's files stay where the VM writes its next. */
		(void)!renameat(dir, SNAP_MEMORY, s->dir, SNAP_MEMORY_NEW);
		goto out;
	}
	/* Past here the save is in to: the next one's files take its names. */
	if (renameat(s->dir, SNAP_MEMORY_NEXT, s->dir, SNAP_MEMORY_NEW) < 0 ||
	    renameat(s->dir, SNAP_STATE_NEXT, s->dir, SNAP_STATE_NEW) < 0)
		log_warn("%s: the next save's files: %s", s->path, strerror(errno));
	return 1;
out:
	unlinkat(s->dir, SNAP_STATE_NEXT, 0);
	unlinkat(s->dir, SNAP_MEMORY_NEXT, 0);
	if (*state_fd >= 0)
		close(*state_fd);
	if (*mem_fd >= 0)
		close(*mem_fd);
	*state_fd = *mem_fd = -1;
	return r;
}
