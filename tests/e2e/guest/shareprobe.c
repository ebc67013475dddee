/* shareprobe: escape attempts from inside a sandbox's container, as root,
 * against its host directory shares (tests/e2e/test_share_escape.py).
 *
 *   shareprobe RW RO SECRET HOST_CANARY [RACE_SEC]
 *
 * RW and RO are a writable and a read-only share as the container sees
 * them; SECRET is the content of a file in HOST_CANARY, a host directory
 * beside the shares (its host path, which means nothing in the guest).
 * Each attempt prints one line, `NAME ok DETAIL` or `NAME FAIL DETAIL`:
 * ok when the attempt got nothing from outside its share (an error, or
 * the guest's own files) and changed nothing there as far as the guest
 * can tell; the test checks the host side. Files the host prepared in RW:
 * `file`, `race/x` and `racef` (which the host swaps for symlinks to the
 * canary while this runs), `victim/` and `held` (removed by the host when
 * this creates `.ready-victim`, `held` replaced by a symlink to the
 * canary's secret; the host then creates `.done-victim`). The
 * exit status is 0 when every line is ok. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define FUSE_MAGIC  0x65735546
#define BUF	    65536
#define VICTIM_WAIT 20 /* seconds the host has to remove victim/ */

static const char *rw, *ro, *secret, *host_canary;
static int race_sec = 3;
static int failed;

static void report(const char *name, bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %s ", name, ok ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	failed += !ok;
}

static const char *P(const char *base, const char *rel)
{
	static char buf[8][4096];
	static int i;

	i = (i + 1) % 8;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", base, rel);
	return buf[i];
}

static bool has_secret(const char *buf, size_t n)
{
	return memmem(buf, n, secret, strlen(secret)) != NULL;
}

/* Read what path opens to (flags); returns -errno, or the bytes read, with
 * *leak set when the secret is among them. */
static long read_path(const char *path, int flags, bool *leak)
{
	static char buf[BUF];
	int fd = open(path, flags | O_RDONLY | O_CLOEXEC);
	ssize_t n;

	*leak = false;
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return -errno;
	*leak = has_secret(buf, (size_t)n);
	return n;
}

/* Does directory path list a name of the canary, or the secret? */
static long list_path(const char *path, bool *leak)
{
	DIR *d = opendir(path);
	struct dirent *e;
	long n = 0;

	*leak = false;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		*leak |= strcmp(e->d_name, "secret") == 0 || strcmp(e->d_name, "canary") == 0;
		n++;
	}
	closedir(d);
	return n;
}

static void try_read(const char *name, const char *path, int flags)
{
	bool leak;
	long n = read_path(path, flags, &leak);

	report(name, !leak, "%s: %s", path,
	       n < 0  ? strerror((int)-n)
	       : leak ? "read the secret"
		      : "read, no secret");
}

static void put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd >= 0) {
		if (write(fd, s, strlen(s)) < 0)
			perror(path);
		close(fd);
	}
}

/* ---- symlinks out of the share ---- */

static void symlinks(void)
{
	char abs[4096];

	snprintf(abs, sizeof(abs), "%s/secret", host_canary);
	symlink("../canary/secret", P(rw, "rel1"));
	symlink("../../../../../../../../canary/secret", P(rw, "rel2"));
	symlink(abs, P(rw, "abs"));
	symlink(host_canary, P(rw, "absdir"));
	symlink("../canary", P(rw, "reldir"));
	try_read("symlink_rel", P(rw, "rel1"), 0);
	try_read("symlink_rel_deep", P(rw, "rel2"), 0);
	try_read("symlink_rel_nofollow", P(rw, "rel1"), O_NOFOLLOW);
	try_read("symlink_abs", P(rw, "abs"), 0);
	try_read("symlink_abs_nofollow", P(rw, "abs"), O_NOFOLLOW);
	try_read("symlink_absdir", P(rw, "absdir/secret"), 0);
	try_read("symlink_reldir", P(rw, "reldir/secret"), 0);
	try_read("dotdot_path", P(rw, "../canary/secret"), 0);
	try_read("dotdot_abs", P(rw, "../../../../../../..") /* the guest's / */, O_DIRECTORY);

	bool leak;
	long n = list_path(P(rw, "absdir"), &leak);

	report("symlink_dir_list", !leak, "%s", n < 0 ? strerror((int)-n) : "listed, no canary");
	n = list_path(P(rw, ".."), &leak);
	report("dotdot_list", !leak, "%ld entries in the share's parent", n);
	char buf[4096] = "";
	ssize_t k = readlink(P(rw, "abs"), buf, sizeof(buf) - 1);

	report("readlink_text", k > 0 && strcmp(buf, abs) == 0, "%s",
	       k > 0 ? buf : strerror(errno));
}

/* ---- links ---- */

static void links(void)
{
	bool leak;
	long n;
	int r;

	/* link(2) does not follow; linkat with AT_SYMLINK_FOLLOW follows in
	 * the guest, where the host path means nothing. */
	r = link(P(rw, "abs"), P(rw, "hl1"));
	n = read_path(P(rw, "hl1"), 0, &leak);
	report("hardlink_symlink", !leak, "link: %s, read: %s", r ? strerror(errno) : "made",
	       n < 0  ? strerror((int)-n)
	       : leak ? "the secret"
		      : "no secret");
	r = linkat(AT_FDCWD, P(rw, "abs"), AT_FDCWD, P(rw, "hl2"), AT_SYMLINK_FOLLOW);
	n = read_path(P(rw, "hl2"), 0, &leak);
	report("hardlink_follow", !leak && r < 0, "linkat: %s", r ? strerror(errno) : "made");
	r = link(P(ro, "keep"), P(rw, "hl3"));
	report("hardlink_across", r < 0 && errno == EXDEV, "%s", r ? strerror(errno) : "made");
	r = link(P(rw, "file"), "/probe-hl");
	report("hardlink_out", r < 0 && errno == EXDEV, "%s", r ? strerror(errno) : "made");
}

/* ---- device nodes, FIFOs, sockets ---- */

/* A device node the guest made: shown as one, never opened (nodev).
 * Where the host's filesystem keeps no user xattrs, mknod is EPERM
 * instead (the test checks which, on the host). */
static bool device_kept(const char *path, mode_t type, dev_t rdev)
{
	struct stat st;
	int fd;

	if (stat(path, &st) < 0 || (st.st_mode & S_IFMT) != type || st.st_rdev != rdev)
		return false;
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return false;
	}
	return true;
}

static void nodes(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int r, s;
	bool leak;
	long n;

	r = mknod(P(rw, "null"), S_IFCHR | 0666, makedev(1, 3));
	report("mknod_chr",
	       r == 0 ? device_kept(P(rw, "null"), S_IFCHR, makedev(1, 3)) : errno == EPERM, "%s",
	       r ? strerror(errno) : "made, in the guest's view only");
	r = mknod(P(rw, "sda"), S_IFBLK | 0666, makedev(8, 0));
	report("mknod_blk",
	       r == 0 ? device_kept(P(rw, "sda"), S_IFBLK, makedev(8, 0)) : errno == EPERM, "%s",
	       r ? strerror(errno) : "made, in the guest's view only");
	r = mknod(P(rw, "wh"), S_IFCHR | 0666, makedev(0, 0));
	report("mknod_whiteout",
	       r == 0 ? device_kept(P(rw, "wh"), S_IFCHR, makedev(0, 0)) : errno == EPERM, "%s",
	       r ? strerror(errno) : "made, in the guest's view only");
	r = mkfifo(P(rw, "fifo"), 0666);
	if (r == 0) {
		/* the guest's own pipe: what is written is read back here */
		int fd = open(P(rw, "fifo"), O_RDWR | O_NONBLOCK | O_CLOEXEC);
		char buf[8] = "";

		r = fd < 0 || write(fd, "pipe", 4) != 4 || read(fd, buf, 4) != 4 ||
		    memcmp(buf, "pipe", 4);
		if (fd >= 0)
			close(fd);
	}
	report("mknod_fifo", r == 0, "%s", r ? strerror(errno) : "made, a guest-side pipe");
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", P(rw, "sock"));
	r = bind(s, (struct sockaddr *)&sa, sizeof(sa));
	report("mknod_sock", r == 0, "%s", r ? strerror(errno) : "bound");
	close(s);
	/* device and FIFO nodes the host made: the guest's own devices, or refused */
	n = read_path(P(rw, "hostnull"), O_NONBLOCK, &leak);
	report("host_chr_open", !leak, "%s", n < 0 ? strerror((int)-n) : "the guest's device");
	n = read_path(P(rw, "hostfifo"), O_NONBLOCK, &leak);
	report("host_fifo_open", !leak, "%s", n < 0 ? strerror((int)-n) : "a guest-side pipe");
}

/* ---- setuid and setgid ---- */

static void setid(void)
{
	int r, fd;

	put(P(rw, "suid"), "x");
	r = chmod(P(rw, "suid"), 04755);
	report("setuid_chmod", true, "chmod: %s (the test checks the host's mode)",
	       r ? strerror(errno) : "done");
	fd = open(P(rw, "suid-new"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 06755);
	report("setuid_create", true, "create: %s", fd < 0 ? strerror(errno) : "made");
	if (fd >= 0) {
		r = fchmod(fd, 06777);
		close(fd);
	}
	r = mknod(P(rw, "suid-mknod"), S_IFREG | 06755, 0);
	report("setuid_mknod", true, "mknod: %s", r ? strerror(errno) : "made");
	mkdir(P(rw, "sgid"), 02775);
	fd = open(P(rw, "sgid/f"), O_WRONLY | O_CREAT | O_CLOEXEC, 02755);
	report("setgid_in_dir", true, "%s", fd < 0 ? strerror(errno) : "made");
	if (fd >= 0)
		close(fd);
	r = chown(P(rw, "suid"), 0, 0);
	report("chown_root", true, "%s (the host keeps its owner)", r ? strerror(errno) : "done");
}

/* ---- renames ---- */

static void renames(void)
{
	int r;

	put(P(rw, "mv-me"), "move");
	r = rename(P(rw, "mv-me"), "/probe-moved");
	put(P(rw, "mv-me"), "move");
	report("rename_out_rootfs", r < 0 && errno == EXDEV, "%s", r ? strerror(errno) : "moved");
	put("/probe-in", "in");
	r = rename("/probe-in", P(rw, "probe-in"));
	report("rename_in_rootfs", r < 0 && errno == EXDEV, "%s", r ? strerror(errno) : "moved");
	r = rename(P(rw, "mv-me"), P(ro, "mv-me"));
	report("rename_across_shares", r < 0 && errno == EXDEV, "%s",
	       r ? strerror(errno) : "moved");
	r = rename(P(ro, "keep"), P(rw, "stolen"));
	report("rename_from_ro", r < 0 && (errno == EXDEV || errno == EROFS), "%s",
	       r ? strerror(errno) : "moved");
	r = renameat2(AT_FDCWD, P(rw, "mv-me"), AT_FDCWD, "/probe-in", RENAME_EXCHANGE);
	report("rename_exchange_out", r < 0 && errno == EXDEV, "%s",
	       r ? strerror(errno) : "exchanged");
	r = renameat2(AT_FDCWD, P(rw, "mv-me"), AT_FDCWD, P(rw, "wo"), RENAME_WHITEOUT);
	report("rename_whiteout", r < 0, "%s", r ? strerror(errno) : "done");
	r = rename(P(rw, "mv-me"), P(rw, "../mv-me"));
	report("rename_to_parent", r < 0, "%s", r ? strerror(errno) : "moved");
}

/* ---- file handles, /proc, O_PATH ---- */

static void handles(void)
{
	struct {
		struct file_handle fh;
		unsigned char raw[128];
	} h = { .fh.handle_bytes = 128 };
	int mnt = -1, fd, r;
	bool leak = false;

	r = name_to_handle_at(AT_FDCWD, P(rw, "file"), &h.fh, &mnt, 0);
	if (r == 0) {
		int dirfd = open(rw, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		fd = open_by_handle_at(dirfd, &h.fh, O_RDONLY);
		report("open_by_handle", fd < 0, "%s", fd < 0 ? strerror(errno) : "opened");
		if (fd >= 0)
			close(fd);
		/* a forged one: the same handle with its bytes changed */
		for (unsigned i = 0; i < h.fh.handle_bytes; i++)
			h.raw[i] ^= 0x5a;
		fd = open_by_handle_at(dirfd, &h.fh, O_RDONLY);
		report("open_by_handle_forged", fd < 0, "%s", fd < 0 ? strerror(errno) : "opened");
		if (fd >= 0)
			close(fd);
		close(dirfd);
	} else {
		report("open_by_handle", true, "name_to_handle_at: %s", strerror(errno));
	}

	/* /proc/self/fd magic links of a share's fd: they lead to the guest's
	 * own view, never past the share's root on the host */
	char p[64];
	long n;

	fd = open(rw, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(p, sizeof(p), "/proc/self/fd/%d/../canary/secret", fd);
	try_read("proc_fd_dotdot", p, 0);
	snprintf(p, sizeof(p), "/proc/self/fd/%d/..", fd);
	n = list_path(p, &leak);
	report("proc_fd_parent", !leak, "%ld entries", n);
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	symlink(p, P(rw, "magic"));
	try_read("proc_magic_in_share", P(rw, "magic/../canary/secret"), 0);

	/* O_PATH of the symlink itself, reopened through /proc: ELOOP */
	int l = open(P(rw, "abs"), O_PATH | O_NOFOLLOW | O_CLOEXEC);

	snprintf(p, sizeof(p), "/proc/self/fd/%d", l);
	try_read("opath_reopen_symlink", p, 0);
	/* openat beneath an O_PATH fd of the share */
	int o = openat(fd, "../canary/secret", O_RDONLY | O_CLOEXEC);

	report("opath_openat_dotdot", o < 0, "%s", o < 0 ? strerror(errno) : "opened");
	if (o >= 0)
		close(o);
	struct open_how how = { .flags = O_RDONLY, .resolve = RESOLVE_BENEATH };

	o = (int)syscall(SYS_openat2, fd, "abs", &how, sizeof(how));
	report("openat2_beneath", o < 0, "%s", o < 0 ? strerror(errno) : "opened");
	if (o >= 0)
		close(o);
	close(l);
	close(fd);
}

/* ---- attributes: statfs, xattrs ---- */

static void attrs(void)
{
	static const char *const names[] = { "trusted.x", "security.capability", "security.selinux",
					     "system.posix_acl_access" };
	char buf[256];
	struct statfs sf;
	ssize_t n;
	int r;

	r = statfs(rw, &sf);
	report("statfs", r == 0 && sf.f_type == FUSE_MAGIC, "%s type %lx",
	       r ? strerror(errno) : "ok", r ? 0 : (unsigned long)sf.f_type);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char name[64];

		r = setxattr(P(rw, "file"), names[i], "\1\0\0\2\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
			     20, 0);
		snprintf(name, sizeof(name), "xattr_set_%s", names[i]);
		report(name, r < 0, "%s", r ? strerror(errno) : "set");
	}
	n = getxattr(P(rw, "file"), "trusted.secret", buf, sizeof(buf));
	report("xattr_get_trusted", n < 0 || !has_secret(buf, (size_t)n), "%s",
	       n < 0 ? strerror(errno) : "read");
	n = listxattr(P(rw, "file"), buf, sizeof(buf));
	report("xattr_list", n < 0 || !memmem(buf, (size_t)n, "trusted", 7), "%zd bytes", n);
	r = setxattr(P(rw, "file"), "user.probe", "v", 1, 0);
	report("xattr_user", true, "%s", r ? strerror(errno) : "set");
	int fd = open(P(rw, "file"), O_RDONLY | O_CLOEXEC);
	long flags = 0;

	r = fd < 0 ? -1 : ioctl(fd, FS_IOC_GETFLAGS, &flags);
	report("ioctl_getflags", r < 0, "%s", r ? strerror(errno) : "answered");
	flags = FS_IMMUTABLE_FL;
	r = fd < 0 ? -1 : ioctl(fd, FS_IOC_SETFLAGS, &flags);
	report("ioctl_setflags", r < 0, "%s", r ? strerror(errno) : "answered");
	if (fd >= 0)
		close(fd);
}

/* ---- the ro share ---- */

static void read_only(void)
{
	static const char *what[] = { "truncate", "open_wr", "append", "unlink", "rename", "mkdir",
				      "symlink",  "chmod",   "utime",  "create", "xattr" };
	int r = 0;

	for (size_t i = 0; i < sizeof(what) / sizeof(what[0]); i++) {
		char name[64];
		int fd;

		errno = 0;
		switch (i) {
		case 0:
			r = truncate(P(ro, "keep"), 0);
			break;
		case 1:
			fd = open(P(ro, "keep"), O_WRONLY | O_CLOEXEC);
			r = fd < 0 ? -1 : 0;
			break;
		case 2:
			fd = open(P(ro, "keep"), O_RDWR | O_APPEND | O_CLOEXEC);
			r = fd < 0 ? -1 : 0;
			break;
		case 3:
			r = unlink(P(ro, "keep"));
			break;
		case 4:
			r = rename(P(ro, "keep"), P(ro, "k2"));
			break;
		case 5:
			r = mkdir(P(ro, "d"), 0755);
			break;
		case 6:
			r = symlink("x", P(ro, "l"));
			break;
		case 7:
			r = chmod(P(ro, "keep"), 0777);
			break;
		case 8:
			r = utimensat(AT_FDCWD, P(ro, "keep"), NULL, 0);
			break;
		case 9:
			fd = open(P(ro, "new"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			r = fd < 0 ? -1 : 0;
			break;
		default:
			r = setxattr(P(ro, "keep"), "user.x", "v", 1, 0);
		}
		snprintf(name, sizeof(name), "ro_%s", what[i]);
		report(name, r < 0 && errno == EROFS, "%s", r ? strerror(errno) : "done");
	}
}

/* ---- offsets ---- */

static void offsets(void)
{
	int fd = open(P(rw, "sparse"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	off_t far = (off_t)1 << 40;
	char buf[8] = "";
	struct stat st;
	ssize_t n, k;
	int r;

	n = pwrite(fd, "far", 3, far);
	if (n == 3)
		n = pread(fd, buf, 3, far);
	report("sparse_1tib", (n == 3 && !memcmp(buf, "far", 3)) || (n < 0 && errno == EFBIG), "%s",
	       n < 0 ? strerror(errno) : "written and read back");
	/* At the top of off_t: refused, or written there (a sparse file in the
	 * share), never wrapped to a small offset. */
	n = pwrite(fd, "x", 1, INT64_MAX - 1);
	memset(buf, 1, sizeof(buf));
	k = pread(fd, buf, 1, 0);
	report("write_at_max", k == 1 && buf[0] == 0, "%s",
	       n < 0 ? strerror(errno) : "written there");
	r = ftruncate(fd, INT64_MAX);
	report("truncate_max", r < 0 || (fstat(fd, &st) == 0 && st.st_size == INT64_MAX), "%s",
	       r ? strerror(errno) : "done");
	n = pread(fd, buf, 1, INT64_MAX);
	report("read_at_max", n <= 0, "%zd", n);
	r = fallocate(fd, 0, INT64_MAX - 10, 100);
	report("fallocate_wrap", r < 0, "%s", r ? strerror(errno) : "done");
	r = fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 4096);
	report("fallocate_collapse", r < 0, "%s", r ? strerror(errno) : "done");
	off_t o = lseek(fd, far * 4, SEEK_DATA);
	report("seek_data_past_end", o < 0, "%s", o < 0 ? strerror(errno) : "found");
	r = ftruncate(fd, 0);
	close(fd);
	fd = open(rw, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	report("tmpfile", fd < 0, "%s", fd < 0 ? strerror(errno) : "made");
	if (fd >= 0)
		close(fd);
}

/* ---- a directory deleted on the host while the guest lists it ---- */

static bool wait_for(const char *path, int sec)
{
	struct timespec t = { 0, 100 * 1000 * 1000 };

	for (int i = 0; i < sec * 10; i++) {
		if (access(path, F_OK) == 0)
			return true;
		nanosleep(&t, NULL);
	}
	return false;
}

/* A file open here that the host unlinked and replaced by a symlink to
 * the canary's secret: the fd keeps the old inode, which cannot be linked
 * back, and the name leads nowhere in the guest. */
static void deleted_file(int fd)
{
	char buf[64] = "", link[64];
	struct stat st;
	bool leak;
	struct timespec ttl = { 1, 200 * 1000 * 1000 };
	ssize_t n;
	long k;
	int r;

	nanosleep(&ttl, NULL); /* past the guest's 1 s attribute cache */
	n = pread(fd, buf, sizeof(buf) - 1, 0);

	report("deleted_fd_read", n > 0 && !has_secret(buf, (size_t)n) && !strcmp(buf, "held\n"),
	       "%zd bytes", n);
	n = pwrite(fd, "HELD", 4, 0);
	report("deleted_fd_write", n == 4, "%s", n < 0 ? strerror(errno) : "the old inode");
	r = fstat(fd, &st);
	report("deleted_fd_stat", r == 0 && st.st_nlink == 0, "nlink %ld",
	       r ? -1L : (long)st.st_nlink);
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	r = linkat(AT_FDCWD, link, AT_FDCWD, P(rw, "held-back"), AT_SYMLINK_FOLLOW);
	report("deleted_fd_link_back", r < 0, "%s", r ? strerror(errno) : "linked");
	k = read_path(P(rw, "held"), 0, &leak);
	report("deleted_name_now", !leak, "%s", k < 0 ? strerror((int)-k) : "read, no secret");
}

static void deleted_dir(void)
{
	int fd = open(P(rw, "victim"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int held = open(P(rw, "held"), O_RDWR | O_CLOEXEC);
	char buf[BUF];
	bool leak = false;
	long n, total = 0;

	put(P(rw, ".ready-victim"), "");
	if (fd < 0 || held < 0 || !wait_for(P(rw, ".done-victim"), VICTIM_WAIT)) {
		report("getdents_deleted", false, "%s",
		       fd < 0 || held < 0 ? strerror(errno) : "no host answer");
		return;
	}
	deleted_file(held);
	close(held);
	lseek(fd, 0, SEEK_SET);
	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long p = 0; p < n;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *d = (void *)(buf + p);

			leak |= strcmp(d->name, "secret") == 0;
			total++;
			p += d->reclen;
		}
	}
	report("getdents_deleted", !leak, "%s, %ld entries", n < 0 ? strerror(errno) : "end",
	       total);
	int c = openat(fd, "secret", O_RDONLY | O_CLOEXEC);

	report("openat_deleted", c < 0, "%s", c < 0 ? strerror(errno) : "opened");
	if (c >= 0)
		close(c);
	c = openat(fd, "new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	report("create_in_deleted", c < 0, "%s", c < 0 ? strerror(errno) : "made");
	if (c >= 0)
		close(c);
	close(fd);
	n = list_path(P(rw, "victim"), &leak);
	report("list_replaced", !leak, "%s, %ld entries", n < 0 ? strerror((int)-n) : "listed",
	       n < 0 ? 0 : n);
}

/* ---- while the host swaps names ---- */

/* Both names of each swapped pair, each round: whichever holds the share's
 * own directory or file now, the other is the symlink to the canary. */
static void races(void)
{
	static const char *const dirs[] = { "race", "race-link" };
	static const char *const inside[] = { "race/x", "race-link/x" };
	static const char *const files[] = { "racef", "racef-link" };
	time_t end = time(NULL) + race_sec;
	long rounds = 0, dir_leaks = 0, file_leaks = 0, opened = 0, refused = 0;
	char buf[BUF];

	while (time(NULL) < end) {
		for (int i = 0; i < 2; i++) {
			bool leak;
			long n = read_path(P(rw, inside[i]), 0, &leak);

			dir_leaks += leak;
			opened += n >= 0;
			refused += n < 0;
			list_path(P(rw, dirs[i]), &leak);
			dir_leaks += leak;
			n = read_path(P(rw, files[i]), 0, &leak);
			file_leaks += leak;
			int fd = open(P(rw, files[i]), O_RDWR | O_CLOEXEC);

			if (fd >= 0) {
				ssize_t k = pread(fd, buf, sizeof(buf), 0);

				file_leaks += k > 0 && has_secret(buf, (size_t)k);
				/* a write the host sees in the share's file, or nowhere */
				ssize_t w = pwrite(fd, "race", 4, 0);

				(void)w;
				close(fd);
			}
		}
		rounds++;
	}
	report("race_dir_swap", dir_leaks == 0, "%ld rounds, %ld opened, %ld through a link",
	       rounds, opened, refused);
	report("race_file_swap", file_leaks == 0, "%ld rounds", rounds);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: shareprobe RW RO SECRET HOST_CANARY [RACE_SEC]\n");
		return 2;
	}
	rw = argv[1];
	ro = argv[2];
	secret = argv[3];
	host_canary = argv[4];
	if (argc > 5)
		race_sec = atoi(argv[5]);
	symlinks();
	links();
	nodes();
	setid();
	renames();
	handles();
	attrs();
	read_only();
	offsets();
	deleted_dir();
	races();
	printf("done %d failed\n", failed);
	return failed ? 1 : 0;
}
