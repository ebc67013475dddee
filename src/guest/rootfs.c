/* The container root: the image EROFS (/dev/vdb) read-only under an overlay
 * whose upper layer is the writable ext4 (/dev/vdc, with gantry.rw=1) or a
 * tmpfs, so a container can always write unless the host asked for a
 * read-only root (which crun then enforces). And the PATH lookup docker
 * does before it starts a process, done inside that root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/guest.h"
#include "guest/shares.h"

#define IMAGE_DEV    "/dev/vdb"
#define RWLAYER_DEV  "/dev/vdc"
#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static int fail(char **why, const char *what, const char *path)
{
	if (asprintf(why, "%s %s: %s", what, path, strerror(errno)) < 0)
		*why = NULL;
	return -1;
}

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[GUEST_PATH_MAX];

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* One entry of the host's "/" in the skeleton: a directory bound from the
 * share, a symlink made again (/bin -> usr/bin), and a host mount point
 * the server does not cross (/proc, /home on a partition of its own) an
 * empty directory, for crun's mounts or nothing. Other files are left
 * out. */
static int etc_overlay(const char *lower, const char *to, const char *state)
{
	char upper[GUEST_PATH_MAX], work[GUEST_PATH_MAX], opts[3 * GUEST_PATH_MAX + 64];

	if (guest_pathf(upper, sizeof(upper), "%s/host-etc/upper", state) < 0 ||
	    guest_pathf(work, sizeof(work), "%s/host-etc/work", state) < 0 ||
	    mkdir_p(upper, 0755) < 0 || mkdir_p(work, 0700) < 0 ||
	    guest_pathf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,index=off,xino=off",
			lower, upper, work) < 0 ||
	    mount("overlay", to, "overlay", MS_NODEV | MS_NOSUID, opts) < 0) {
		guest_log("host root: overlay on /etc: %s; bound as it is", strerror(errno));
		return -1;
	}
	return 0;
}

static void host_root_entry(int src, int dst, const char *srcdir, const char *dstdir,
			    const char *name, const char *state)
{
	char from[GUEST_PATH_MAX], to[GUEST_PATH_MAX], target[GUEST_PATH_MAX];
	struct stat st;
	ssize_t n;

	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == EXDEV && mkdirat(dst, name, 0755) < 0)
			guest_log("host root: mkdir /%s: %s", name, strerror(errno));
		return;
	}
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(src, name, target, sizeof(target) - 1);
		if (n < 0)
			return;
		target[n] = '\0';
		if (symlinkat(target, dst, name) < 0)
			guest_log("host root: symlink /%s: %s", name, strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode))
		return;
	if (mkdirat(dst, name, 0755) < 0 ||
	    guest_pathf(from, sizeof(from), "%s/%s", srcdir, name) < 0 ||
	    guest_pathf(to, sizeof(to), "%s/%s", dstdir, name) < 0) {
		guest_log("host root: /%s: %s", name, strerror(errno));
		return;
	}
	/* /etc under an overlay, so that the generated resolv.conf and hosts
	 * and the egress CA have mount points (the host's may be missing,
	 * or symlinks into its /run); the rest bound as they are. */
	if (strcmp(name, "etc") == 0 && etc_overlay(from, to, state) == 0)
		return;
	if (mount(from, to, NULL, MS_BIND | MS_REC, NULL) < 0)
		guest_log("host root: bind /%s: %s", name, strerror(errno));
}

/* The host's "/" (gantry wrap): a tmpfs holding its entries, each bound
 * from the share, so that the container's own /proc, /dev, /sys, /run and
 * /tmp have mount points and a host directory on another filesystem is an
 * empty one. crun makes the whole read-only after its mounts. */
static int host_root(const char *src, const char *rootfs, const char *state, char **why)
{
	DIR *d;
	struct dirent *e;
	int dst;

	if (mount("tmpfs", rootfs, "tmpfs", MS_NODEV | MS_NOSUID, "mode=0755") < 0)
		return fail(why, "mount tmpfs on", rootfs);
	d = opendir(src);
	if (d == NULL)
		return fail(why, "the host root at", src);
	dst = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dst < 0) {
		closedir(d);
		return fail(why, "open", rootfs);
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			host_root_entry(dirfd(d), dst, src, rootfs, e->d_name, state);
	close(dst);
	closedir(d);
	return 0;
}

/* The root the host serves: the hub's directory, bound as it is (a
 * read-only root is crun's to enforce, as for an image). */
static int root_from_share(const struct guest_config *cfg, char **why)
{
	char src[GUEST_PATH_MAX];
	struct stat st;

	if (!shares_tag_valid(cfg->root_share, strlen(cfg->root_share))) {
		*why = strdup("gantry.root=: not a share's tag");
		return -1;
	}
	if (guest_pathf(src, sizeof(src), "%s/%s", SHARES_MOUNT_DIR, cfg->root_share) < 0)
		return fail(why, "root share", cfg->root_share);
	if (stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
		return fail(why, "the root the host shares", src);
	if (mkdir_p(cfg->rootfs, 0755) < 0)
		return fail(why, "mkdir", cfg->rootfs);
	if (cfg->host_root)
		return host_root(src, cfg->rootfs, cfg->state_dir, why);
	if (mount(src, cfg->rootfs, NULL, MS_BIND | MS_REC, NULL) < 0)
		return fail(why, "bind the root the host shares on", cfg->rootfs);
	return 0;
}

int rootfs_assemble(const struct guest_config *cfg, bool rw, char **why)
{
	char image[GUEST_PATH_MAX], layer[GUEST_PATH_MAX], upper[GUEST_PATH_MAX],
		work[GUEST_PATH_MAX], opts[3 * GUEST_PATH_MAX + 64];

	if (cfg->root_share)
		return root_from_share(cfg, why);
	if (guest_pathf(image, sizeof(image), "%s/image", cfg->state_dir) < 0 ||
	    guest_pathf(layer, sizeof(layer), "%s/rw", cfg->state_dir) < 0 ||
	    guest_pathf(upper, sizeof(upper), "%s/upper", layer) < 0 ||
	    guest_pathf(work, sizeof(work), "%s/work", layer) < 0)
		return fail(why, "state directory", cfg->state_dir);
	if (mkdir_p(image, 0755) < 0)
		return fail(why, "mkdir", image);
	if (mkdir_p(layer, 0755) < 0)
		return fail(why, "mkdir", layer);
	if (mkdir_p(cfg->rootfs, 0755) < 0)
		return fail(why, "mkdir", cfg->rootfs);

	if (mount(IMAGE_DEV, image, "erofs", MS_RDONLY | MS_NODEV, NULL) < 0)
		return fail(why, "mount the image", IMAGE_DEV);
	if (rw) {
		if (mount(RWLAYER_DEV, layer, "ext4", MS_NOATIME | MS_NODEV, NULL) < 0)
			return fail(why, "mount the writable layer", RWLAYER_DEV);
	} else if (mount("tmpfs", layer, "tmpfs", MS_NODEV, "mode=0755") < 0) {
		return fail(why, "mount tmpfs on", layer);
	}
	if (mkdir(upper, 0755) < 0 && errno != EEXIST)
		return fail(why, "mkdir", upper);
	if (mkdir(work, 0700) < 0 && errno != EEXIST)
		return fail(why, "mkdir", work);
	guest_pathf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,index=off,xino=off",
		    image, upper, work);
	if (mount("overlay", cfg->rootfs, "overlay", 0, opts) < 0)
		return fail(why, "mount overlay on", cfg->rootfs);
	return 0;
}

/* Open path inside root as if root were "/": symlinks, "..", absolute
 * targets all stay beneath it. */
static int open_in_root(int rootfd, const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* 0 executable file; else the errno that execve would give (roughly). */
static int check_exec(int rootfd, const char *path)
{
	struct stat st;
	int fd = open_in_root(rootfd, path);
	int r = 0;

	if (fd < 0)
		return errno;
	if (fstat(fd, &st) < 0)
		r = errno;
	else if (S_ISDIR(st.st_mode))
		r = EISDIR;
	else if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
		r = EACCES;
	close(fd);
	return r;
}

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static int not_runnable(char **why, const char *argv0, const char *path, int e)
{
	int r;

	if (e == EISDIR)
		r = asprintf(why, "exec: \"%s\": is a directory", argv0);
	else if (e == EACCES)
		r = asprintf(why, "exec: \"%s\": permission denied", argv0);
	else
		r = asprintf(why, "exec: \"%s\": stat %s: %s", argv0, path, strerror(e));
	if (r < 0)
		*why = NULL;
	return e == ENOENT || e == ENOTDIR ? PROTO_ERR_NOT_FOUND : PROTO_ERR_CANNOT;
}

int rootfs_find_command(const char *rootfs, const char *argv0, char *const *env, const char *cwd,
			char **why)
{
	char path[GUEST_PATH_MAX];
	const char *search, *p;
	int rootfd, e, first = 0;

	*why = NULL;
	/* Bound into every container by crun, after this look: it is there. */
	if (strcmp(argv0, GUEST_HELPER_PATH) == 0)
		return 0;
	if (*argv0 == '\0') {
		if (asprintf(why, "exec: \"\": executable file not found in $PATH") < 0)
			*why = NULL;
		return PROTO_ERR_NOT_FOUND;
	}
	rootfd = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		if (asprintf(why, "open the container root %s: %s", rootfs, strerror(errno)) < 0)
			*why = NULL;
		return PROTO_ERR_RUNTIME;
	}
	if (!cwd || !*cwd)
		cwd = "/";
	if (strchr(argv0, '/')) {
		if (argv0[0] == '/')
			e = guest_pathf(path, sizeof(path), "%s", argv0);
		else
			e = guest_pathf(path, sizeof(path), "%s/%s", cwd, argv0);
		e = e < 0 ? ENAMETOOLONG : check_exec(rootfd, path);
		close(rootfd);
		return e ? not_runnable(why, argv0, argv0, e) : 0;
	}
	search = env_get(env, "PATH");
	if (search == NULL)
		search = DEFAULT_PATH;
	for (p = search;; p += strcspn(p, ":") + 1) {
		size_t n = strcspn(p, ":");

		if (n == 0)
			e = guest_pathf(path, sizeof(path), "%s/%s", cwd, argv0);
		else
			e = guest_pathf(path, sizeof(path), "%.*s/%s", (int)n, p, argv0);
		e = e < 0 ? ENAMETOOLONG : check_exec(rootfd, path);
		if (e == 0) {
			close(rootfd);
			return 0;
		}
		/* Like execvp: a match we may not run is remembered, and
		 * reported if nothing better turns up. */
		if (e != ENOENT && e != ENOTDIR && !first)
			first = e;
		if (p[n] == '\0')
			break;
	}
	close(rootfd);
	if (first == EACCES)
		return not_runnable(why, argv0, argv0, EACCES);
	if (asprintf(why, "exec: \"%s\": executable file not found in $PATH", argv0) < 0)
		*why = NULL;
	return PROTO_ERR_NOT_FOUND;
}
