/* The guest console's output and its size cap (see console.h). Rotation
 * happens before the write that would pass the cap, on the vCPU thread
 * that flushes the UART's line: a rename and an open once every
 * VMM_CONSOLE_MAX bytes, a comparison otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "vmm/console.h"

#define CONSOLE_OPEN_FLAGS (O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC)

void console_init_fd(struct console *c, int fd)
{
	*c = (struct console){ .fd = fd };
}

int console_open(struct console *c, const char *path, uint64_t cap, gantry_error_t *err)
{
	struct stat st;
	int fd = open(path, CONSOLE_OPEN_FLAGS, 0644);

	console_init_fd(c, -1);
	if (fd < 0)
		return gantry_error_errno(err, "console `%s`", path);
	c->fd = fd;
	c->owned = true;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0; /* a FIFO or a device: nothing on disk to cap */
	c->path = xstrdup(path);
	xasprintf(&c->old_path, "%s%s", path, CONSOLE_ROTATED);
	c->cap = cap;
	/* The older half of an earlier run is not this run's. */
	if (lstat(c->old_path, &st) == 0 && S_ISREG(st.st_mode))
		unlink(c->old_path);
	return 0;
}

/* The current log becomes the older half and a fresh one starts. Where
 * that fails, the current file is emptied instead: the cap holds either
 * way. */
static void console_rotate(struct console *c)
{
	int fd = -1;

	if (rename(c->path, c->old_path) == 0)
		fd = open(c->path, CONSOLE_OPEN_FLAGS, 0644);
	if (fd >= 0) {
		close(c->fd);
		c->fd = fd;
	} else if (ftruncate(c->fd, 0) == 0) {
		lseek(c->fd, 0, SEEK_SET);
	}
	c->size = 0;
}

void console_write(struct console *c, const void *buf, size_t len)
{
	if (c->fd < 0 || len == 0)
		return;
	if (c->path && c->size > 0 && c->size + len > c->cap)
		console_rotate(c);
	/* Counted even when the write failed part way: the cap errs low. */
	(void)write_full(c->fd, buf, len);
	c->size += len;
}

void console_close(struct console *c)
{
	if (c->owned && c->fd >= 0)
		close(c->fd);
	free(c->path);
	free(c->old_path);
	console_init_fd(c, -1);
}
