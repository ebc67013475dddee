/* sharebench: PID 1 of the share benchmark (bench/share). It mounts the
 * virtiofs tag named on the kernel command line and times, on the share,
 * with the guest's own clock (so every VMM is timed the same way):
 *
 *   untar      the ustar archive /tree.tar (regular files and directories)
 *   stat_cold  a full lstat walk of that tree, the guest's caches dropped
 *   stat_warm  the same walk again at once
 *   seq_write  256 MiB in 1 MiB writes, then fsync
 *   seq_read   that file read back in 1 MiB reads, the caches dropped
 *
 * Most of the guest's RAM is touched once first, untimed (prefault()).
 * Before each phase but stat_warm the share is unmounted and mounted
 * again, so the guest holds nothing of it and what it reads comes from the
 * host. One line per phase
 * on the console, `SHAREBENCH <phase> <seconds> <count> <bytes>`, then
 * `SHAREBENCH done`; an error is `SHAREBENCH error ...` and exit status 1.
 *
 * Kernel command line: sharebench.tag=TAG (the virtiofs tag) and, optional,
 * sharebench.dir=DIR (a share's tag under gantry's hub). With a DIR the
 * tag is mounted at /hub and its DIR bind-mounted at /mnt, as gantry-init
 * mounts a share for a container: no path walk then passes through the
 * hub, whose children the guest never caches. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest/poweroff.h"

#define TAR_PATH       "/tree.tar"
#define MNT	       "/mnt"
#define HUB	       "/hub"
#define SEQ_CHUNK      (1024 * 1024)
#define SEQ_CHUNKS     256
#define PATH_LEN       512
#define TAR_BLOCK      512
#define DEPTH_MAX      32
#define ARG_LEN	       128
#define PROGRESS_FILES 1000
#define PREFAULT_MIB   320

static char work[PATH_LEN];

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("SHAREBENCH error ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" (errno %d: %s)\n", errno, strerror(errno));
	fflush(stdout);
	guest_poweroff(1);
}

/* A path into out (PATH_LEN bytes); one too long ends the run. */
static void path_fmt(char *out, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, PATH_LEN, fmt, ap);
	va_end(ap);
	if (n < 0 || n >= PATH_LEN) {
		errno = ENAMETOOLONG;
		fail("path too long");
	}
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void report(const char *phase, double t0, uint64_t count, uint64_t bytes)
{
	printf("SHAREBENCH %s %.6f %llu %llu\n", phase, now() - t0, (unsigned long long)count,
	       (unsigned long long)bytes);
	fflush(stdout);
}

/* Where a run that hangs was: the phase about to start. */
static void begin(const char *phase)
{
	printf("SHAREBENCH begin %s\n", phase);
	fflush(stdout);
}

/* Touch most of the guest's free RAM once, untimed: the first touch of a
 * guest page is a fault in the host (in a nested host, a costly one), and
 * how many of those a VMM takes depends on how its RAM is backed (QEMU's
 * vhost-user needs shared memory, 4 KiB pages by default; gantry's is
 * anonymous and 2 MiB aligned), which is not what this benchmark is about. */
static void prefault(void)
{
	size_t len = (size_t)PREFAULT_MIB << 20;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap %zu", len);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	munmap(p, len);
}

/* The share mounted afresh: the guest forgets every dentry, inode and
 * page of it (the server gets DESTROY and a new INIT), so what the next
 * phase reads comes from the host. Nothing else in the guest is touched,
 * unlike a global drop_caches. */
/* The share at MNT: the tag itself, or its dir under the hub, bound. */
static void mount_share(const char *tag, const char *dir)
{
	char src[PATH_LEN];

	if (!dir[0]) {
		if (mount(tag, MNT, "virtiofs", 0, NULL) < 0)
			fail("mount virtiofs %s", tag);
		return;
	}
	if (mount(tag, HUB, "virtiofs", 0, NULL) < 0)
		fail("mount virtiofs %s", tag);
	path_fmt(src, "%s/%s", HUB, dir);
	if (mount(src, MNT, NULL, MS_BIND, NULL) < 0)
		fail("bind %s", src);
}

static void remount(const char *tag, const char *dir)
{
	if (umount(MNT) < 0)
		fail("umount %s", MNT);
	if (dir[0] && umount(HUB) < 0)
		fail("umount %s", HUB);
	mount_share(tag, dir);
}

/* The value of key=... on /proc/cmdline into out; false if absent. */
static bool cmdline_arg(const char *key, char *out, size_t cap)
{
	static char line[4096];
	size_t klen = strlen(key);
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, line, sizeof(line) - 1);

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return false;
	line[n] = '\0';
	for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n")) {
		if (strncmp(tok, key, klen) == 0 && tok[klen] == '=' &&
		    strlen(tok + klen + 1) < cap) {
			strcpy(out, tok + klen + 1);
			return true;
		}
	}
	return false;
}

/* The archive where the initramfs left it, in the guest's RAM: mapped,
 * not copied, and touched once before the clock starts. */
static const uint8_t *map_all(const char *path, size_t *len)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	const uint8_t *p;
	volatile uint8_t sum = 0;

	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < TAR_BLOCK)
		fail("open %s", path);
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	if (p == MAP_FAILED)
		fail("mmap %s", path);
	close(fd);
	for (off_t i = 0; i < st.st_size; i += 4096)
		sum += p[i];
	*len = (size_t)st.st_size;
	return p;
}

/* ---- untar ---- */

static uint64_t octal(const char *p, size_t n)
{
	uint64_t v = 0;
	size_t i = 0;

	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++)
		v = v * 8 + (uint64_t)(p[i] - '0');
	return v;
}

/* The entry's path relative to work: prefix/name, both bounded fields. */
static void entry_name(const uint8_t *h, char *out)
{
	char name[101], prefix[156];

	memcpy(name, h, 100);
	name[100] = '\0';
	memcpy(prefix, h + 345, 155);
	prefix[155] = '\0';
	if (prefix[0])
		path_fmt(out, "%s/%s/%s", work, prefix, name);
	else
		path_fmt(out, "%s/%s", work, name);
	/* A directory's trailing slash. */
	for (size_t n = strlen(out); n > 1 && out[n - 1] == '/'; n--)
		out[n - 1] = '\0';
}

static void write_file(const char *path, mode_t mode, const uint8_t *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd < 0)
		fail("create %s", path);
	while (len) {
		ssize_t n = write(fd, data, len);

		if (n <= 0)
			fail("write %s", path);
		data += n;
		len -= (size_t)n;
	}
	if (close(fd) < 0)
		fail("close %s", path);
}

/* A line now and then, so a slow run can be told from one that hangs. */
static void progress(const char *phase, uint64_t n)
{
	printf("SHAREBENCH progress %s %llu\n", phase, (unsigned long long)n);
	fflush(stdout);
}

static void untar(const uint8_t *tar, size_t len, uint64_t *files, uint64_t *bytes)
{
	char path[PATH_LEN];
	size_t off = 0;

	while (off + TAR_BLOCK <= len) {
		const uint8_t *h = tar + off;
		uint64_t size = octal((const char *)h + 124, 12);
		mode_t mode = (mode_t)octal((const char *)h + 100, 8) & 0777;
		char type = (char)h[156];

		if (h[0] == '\0')
			return; /* the end-of-archive blocks */
		off += TAR_BLOCK;
		if (size > len - off)
			fail("tar entry past the archive's end");
		entry_name(h, path);
		if (type == '5') {
			if (mkdir(path, mode) < 0 && errno != EEXIST)
				fail("mkdir %s", path);
		} else if (type == '0' || type == '\0') {
			write_file(path, mode, tar + off, (size_t)size);
			if (++*files % PROGRESS_FILES == 0)
				progress("untar", *files);
			*bytes += size;
		} else {
			errno = EINVAL;
			fail("tar entry type %c", type);
		}
		off += (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	}
}

/* ---- stat walk ---- */

static void walk(char *path, size_t plen, int depth, uint64_t *entries)
{
	DIR *d;
	struct dirent *e;
	struct stat st;

	if (depth > DEPTH_MAX)
		fail("tree deeper than %d", DEPTH_MAX);
	d = opendir(path);
	if (!d)
		fail("opendir %s", path);
	while ((errno = 0, e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (plen + 1 + n >= PATH_LEN)
			fail("path too long under %s", path);
		path[plen] = '/';
		memcpy(path + plen + 1, e->d_name, n + 1);
		if (lstat(path, &st) < 0)
			fail("lstat %s", path);
		(*entries)++;
		if (S_ISDIR(st.st_mode))
			walk(path, plen + 1 + n, depth + 1, entries);
		path[plen] = '\0';
	}
	if (errno)
		fail("readdir %s", path);
	closedir(d);
}

static uint64_t stat_walk(const char *root)
{
	char path[PATH_LEN];
	uint64_t entries = 0;

	path_fmt(path, "%s", root);
	walk(path, strlen(path), 0, &entries);
	return entries;
}

/* ---- sequential ---- */

static void seq_write(const char *path, const uint8_t *buf)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		fail("create %s", path);
	for (int i = 0; i < SEQ_CHUNKS; i++)
		if (write(fd, buf, SEQ_CHUNK) != SEQ_CHUNK)
			fail("write %s", path);
	if (fsync(fd) < 0 || close(fd) < 0)
		fail("fsync %s", path);
}

static uint64_t seq_read(const char *path, uint8_t *buf)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint64_t total = 0;
	ssize_t n;

	if (fd < 0)
		fail("open %s", path);
	while ((n = read(fd, buf, SEQ_CHUNK)) > 0)
		total += (uint64_t)n;
	if (n < 0)
		fail("read %s", path);
	close(fd);
	return total;
}

int main(void)
{
	char tag[ARG_LEN] = "", dir[ARG_LEN] = "", tree[PATH_LEN], big[PATH_LEN];
	uint64_t files = 0, bytes = 0, n;
	const uint8_t *tar;
	uint8_t *buf;
	size_t tar_len;
	double t0;

	if (mount("proc", "/proc", "proc", 0, NULL) < 0)
		fail("mount /proc");
	if (!cmdline_arg("sharebench.tag", tag, sizeof(tag)))
		fail("no sharebench.tag= on the kernel command line");
	cmdline_arg("sharebench.dir", dir, sizeof(dir));
	mkdir(MNT, 0755);
	mkdir(HUB, 0755);
	mount_share(tag, dir);
	path_fmt(work, "%s", MNT);
	path_fmt(tree, "%s/tree", work);
	path_fmt(big, "%s/seq.bin", work);
	if (mkdir(tree, 0755) < 0)
		fail("mkdir %s", tree);
	path_fmt(work, "%s", tree);

	tar = map_all(TAR_PATH, &tar_len);
	prefault();
	begin("untar");
	t0 = now();
	untar(tar, tar_len, &files, &bytes);
	report("untar", t0, files, bytes);
	munmap((void *)tar, tar_len);

	begin("stat");
	remount(tag, dir);
	t0 = now();
	n = stat_walk(tree);
	report("stat_cold", t0, n, 0);
	t0 = now();
	n = stat_walk(tree);
	report("stat_warm", t0, n, 0);

	buf = malloc(SEQ_CHUNK);
	if (!buf)
		fail("malloc");
	for (size_t i = 0; i < SEQ_CHUNK; i++)
		buf[i] = (uint8_t)(i * 131 + 7);
	begin("seq_write");
	remount(tag, dir);
	t0 = now();
	seq_write(big, buf);
	report("seq_write", t0, 1, (uint64_t)SEQ_CHUNK * SEQ_CHUNKS);
	begin("seq_read");
	remount(tag, dir);
	t0 = now();
	n = seq_read(big, buf);
	report("seq_read", t0, 1, n);
	if (n != (uint64_t)SEQ_CHUNK * SEQ_CHUNKS) {
		errno = EIO;
		fail("read back %llu bytes", (unsigned long long)n);
	}
	printf("SHAREBENCH done\n");
	fflush(stdout);
	guest_poweroff(0);
}
