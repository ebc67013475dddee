/* Writable layers (see rwlayer.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "sandbox/rwlayer.h"

#define RWLAYER_MKE2FS_OUT 4096 /* bytes of mke2fs's complaint quoted */

/* mke2fs lives in sbin, which a user's PATH may lack. */
const char *rwlayer_mke2fs(void)
{
	static const char *const dirs[] = { "/usr/sbin/mke2fs", "/sbin/mke2fs" };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (access(dirs[i], X_OK) == 0)
			return dirs[i];
	return "mke2fs";
}

static int run_mke2fs(const char *path, gantry_error_t *err)
{
	char out[RWLAYER_MKE2FS_OUT];
	int pipefd[2], status = 0;
	ssize_t n, got = 0;
	pid_t pid, w;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return gantry_error_errno(err, "pipe");
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return gantry_error_errno(err, "fork");
	}
	if (pid == 0) {
		const char *mke2fs = rwlayer_mke2fs();

		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		/* Lazy init: the guest's kernel finishes the inode tables. */
		execlp(mke2fs, "mke2fs", "-q", "-F", "-t", "ext4", "-L", RWLAYER_LABEL, "-m", "0",
		       "-E", "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0", path,
		       (char *)NULL);
		dprintf(2, "cannot run mke2fs: %s (install e2fsprogs)", strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += n;
	close(pipefd[0]);
	out[got] = '\0';
	while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	if (w < 0)
		return gantry_error_errno(err, "wait for mke2fs");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	for (char *p = out; *p; p++)
		if (*p == '\n')
			*p = ' ';
	return gantry_error(err, 0, "mke2fs failed: %s", got ? out : "no output");
}

int rwlayer_create(const char *path, uint64_t size_mib, gantry_error_t *err)
{
	cleanup_free char *tmp = NULL;
	cleanup_close int fd = -1;

	if (size_mib < RWLAYER_MIN_MIB || size_mib > RWLAYER_MAX_MIB)
		return gantry_error_opt(err, "disk_mib", " %llu: want %d to %d MiB",
					(unsigned long long)size_mib, RWLAYER_MIN_MIB,
					RWLAYER_MAX_MIB);
	xasprintf(&tmp, "%s.new", path);
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return gantry_error_errno(err, "create writable layer `%s`", tmp);
	if (ftruncate(fd, (off_t)(size_mib * MiB)) < 0) {
		gantry_error_errno(err, "size writable layer `%s`", tmp);
		goto fail;
	}
	if (run_mke2fs(tmp, err) < 0 || fsync(fd) < 0) {
		gantry_error_prefix(err, "writable layer `%s`", path);
		goto fail;
	}
	if (rename(tmp, path) < 0) {
		gantry_error_errno(err, "rename `%s`", tmp);
		goto fail;
	}
	return 0;
fail:
	unlink(tmp);
	return -1;
}

int rwlayer_pair(const char *path, const char *image_id, bool adopt, gantry_error_t *err)
{
	cleanup_free char *side = NULL, *have = NULL;
	size_t len;

	xasprintf(&side, "%s%s", path, RWLAYER_SIDECAR);
	if (read_file_max(side, 4096, &have, &len, err) < 0)
		return -1;
	if (have == NULL) {
		cleanup_free char *line = NULL;

		if (!adopt)
			return gantry_error(err, 0,
					    "writable layer `%s` has no `%s` saying which image it "
					    "belongs to; refusing to attach it",
					    path, side);
		xasprintf(&line, "%s\n", image_id);
		return write_file_atomic(side, line, strlen(line), 0600, err);
	}
	have[strcspn(have, "\n")] = '\0';
	if (strcmp(have, image_id) != 0)
		return gantry_error(err, 0,
				    "writable layer `%s` belongs to image %s, not %s; refusing to "
				    "attach it to another image",
				    path, have, image_id);
	return 0;
}

bool rwlayer_in_use(const char *path)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0)
		return errno == EWOULDBLOCK;
	return false;
}

void rwlayer_remove(const char *path)
{
	cleanup_free char *side = NULL;

	xasprintf(&side, "%s%s", path, RWLAYER_SIDECAR);
	unlink(path);
	unlink(side);
}
