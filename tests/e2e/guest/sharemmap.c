/* Run in a sandbox's container on a share (test_share.py): what editors,
 * compilers and git do to files there besides read and write.
 *
 *   sharemmap DIR
 *
 * 1. mmap: a file made with ftruncate, written through a MAP_SHARED map,
 *    msync'd: its bytes must be what read() gives back, and what the host
 *    then finds in it (the test checks "DIR/mapped").
 * 2. git's index update: "index.lock" created O_EXCL, written, fsync'd,
 *    renamed over "index", then mapped read-only and checked; a second
 *    O_EXCL create of the lock while it exists fails with EEXIST.
 * 3. a host-written "from-host" read through a MAP_PRIVATE map.
 * Prints "ok" and exits 0, or one line saying what failed and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAP_BYTES (3 * 4096 + 100)

static int fail(const char *what)
{
	printf("%s: %s\n", what, strerror(errno));
	return 1;
}

static char pattern(size_t i)
{
	return (char)('a' + i % 26);
}

static int mapped_write(const char *dir)
{
	char path[4096], buf[MAP_BYTES];
	char *p;
	int fd;

	snprintf(path, sizeof(path), "%s/mapped", dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, MAP_BYTES) < 0)
		return fail("create mapped");
	p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap MAP_SHARED");
	for (size_t i = 0; i < MAP_BYTES; i++)
		p[i] = pattern(i);
	if (msync(p, MAP_BYTES, MS_SYNC) < 0)
		return fail("msync");
	munmap(p, MAP_BYTES);
	if (pread(fd, buf, sizeof(buf), 0) != MAP_BYTES)
		return fail("read back mapped");
	for (size_t i = 0; i < MAP_BYTES; i++)
		if (buf[i] != pattern(i)) {
			errno = EIO;
			return fail("mapped bytes differ");
		}
	return close(fd) < 0 ? fail("close mapped") : 0;
}

static int index_update(const char *dir)
{
	static const char body[] = "DIRC index body\n";
	char lock[4096], index[4096];
	char *p;
	int fd;

	snprintf(lock, sizeof(lock), "%s/index.lock", dir);
	snprintf(index, sizeof(index), "%s/index", dir);
	fd = open(lock, O_RDWR | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return fail("create index.lock");
	if (open(lock, O_RDWR | O_CREAT | O_EXCL, 0644) >= 0 || errno != EEXIST) {
		errno = errno ? errno : EINVAL;
		return fail("second index.lock");
	}
	if (write(fd, body, sizeof(body) - 1) != (ssize_t)sizeof(body) - 1 || fsync(fd) < 0 ||
	    close(fd) < 0)
		return fail("write index.lock");
	if (rename(lock, index) < 0)
		return fail("rename index.lock index");
	fd = open(index, O_RDONLY);
	if (fd < 0)
		return fail("open index");
	p = mmap(NULL, sizeof(body) - 1, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap index");
	if (memcmp(p, body, sizeof(body) - 1) != 0) {
		errno = EIO;
		return fail("index contents");
	}
	munmap(p, sizeof(body) - 1);
	close(fd);
	if (access(lock, F_OK) == 0) {
		errno = EEXIST;
		return fail("index.lock left");
	}
	return 0;
}

static int host_file(const char *dir)
{
	char path[4096];
	struct stat st;
	char *p;
	int fd;

	snprintf(path, sizeof(path), "%s/from-host", dir);
	fd = open(path, O_RDONLY);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0)
		return fail("open from-host");
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED)
		return fail("mmap from-host");
	fwrite(p, 1, (size_t)st.st_size, stdout);
	munmap(p, (size_t)st.st_size);
	return close(fd) < 0 ? fail("close from-host") : 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sharemmap DIR\n");
		return 2;
	}
	if (mapped_write(argv[1]) || index_update(argv[1]) || host_file(argv[1]))
		return 1;
	printf("ok\n");
	return 0;
}
