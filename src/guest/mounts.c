/* Shares added and removed while a sandbox runs (MOUNT and UNMOUNT, see
 * proto/agent.h): the share hub's directory TAG is cloned here as a
 * detached bind mount (open_tree), made nosuid, nodev and maybe read-only
 * (mount_setattr), and attached at its path inside the long-lived
 * container's mount namespace by a child that joined it (setns, then
 * move_mount). Sessions are `crun exec`s into that namespace, so they and
 * the processes already running all see it at once. The host's server
 * enforces ro and confinement whatever happens here; this only decides
 * where the guest sees a share. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/guest.h"

static bool hub_mounted;

int mounts_hub(void)
{
	const char *dir = SHARES_MOUNT_DIR;

	if (hub_mounted)
		return 0;
	if (mkdir("/run/mnt", 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mount(SHARES_FS_TAG, dir, "virtiofs", MS_NOSUID | MS_NODEV, NULL) < 0)
		return -errno;
	hub_mounted = true;
	return 0;
}

void mounts_hub_release(void)
{
	if (hub_mounted)
		umount2(SHARES_MOUNT_DIR, MNT_DETACH);
	hub_mounted = false;
}

static void done(struct guest *g, uint32_t id, int error, const char *why)
{
	struct proto_msg m = { .type = PROTO_DONE };

	m.u.done.id = id;
	m.u.done.error = (uint32_t)error;
	m.u.done.message = (char *)(why ? why : "");
	guest_debug(g, "mount request %u: %s", id, error ? why : "done");
	link_send(g, &m);
}

/* mkdir -p, inside the container's namespace (its own paths: a symlink in
 * them leads where the container's own processes would be led). */
static int make_path(char *path)
{
	for (char *p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;

		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			*p = c;
			return -1;
		}
		*p = c;
		if (c == '\0')
			return 0;
	}
}

#define CHECK_TREE (-2) /* run_in_container: only ask the share at path */

/* Whether path is a share's bind whose server knows its root: the
 * attributes asked of the server itself, not the guest's cache. */
static int check_share(const char *path)
{
	struct statfs fs;
	struct statx x;

	if (statfs(path, &fs) < 0)
		return -1;
	if (fs.f_type != FUSE_SUPER_MAGIC) {
		errno = ENOENT;
		return -1;
	}
	return statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC, STATX_INO, &x);
}

/* Run in a child that enters the container's mount namespace: attach
 * tree at path (tree >= 0), check the share there (CHECK_TREE) or detach
 * what is at path. The errno that failed it, with a word on the step,
 * goes back through the pipe. */
static void __attribute__((noreturn)) in_container(int ns, int tree, char *path, int report)
{
	const char *step = "setns";
	char msg[MOUNTS_WHY_MAX];
	int r = setns(ns, CLONE_NEWNS), n;

	if (r == 0 && tree >= 0) {
		step = "make the mount point";
		r = make_path(path);
		if (r == 0) {
			step = "move_mount";
			r = move_mount(tree, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
		}
	} else if (r == 0 && tree == CHECK_TREE) {
		step = "ask the share";
		r = check_share(path);
	} else if (r == 0) {
		step = "umount";
		r = umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW);
	}
	if (r == 0)
		_exit(0);
	n = snprintf(msg, sizeof(msg), "%d %s: %s", errno, step, strerror(errno));
	(void)!write(report, msg, (size_t)n);
	_exit(1);
}

/* 0, or the errno with why filled. */
static int run_in_container(struct guest *g, int tree, const char *path, char *why)
{
	char ns_path[64], copy[PROTO_MAX_PATH + 1], msg[MOUNTS_WHY_MAX + 1];
	int ns, pipefd[2], status = 0, e = 0;
	ssize_t n;
	pid_t pid;

	if (!g->cfg.persist || g->container <= 0) {
		snprintf(why, MOUNTS_WHY_MAX, "the sandbox's container is not running");
		return ESRCH;
	}
	snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", (int)g->container);
	snprintf(copy, sizeof(copy), "%s", path);
	ns = open(ns_path, O_RDONLY | O_CLOEXEC);
	if (ns < 0) {
		e = errno;
		snprintf(why, MOUNTS_WHY_MAX, "open the container's mount namespace: %s",
			 strerror(e));
		return e;
	}
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		e = errno;
		close(ns);
		snprintf(why, MOUNTS_WHY_MAX, "pipe: %s", strerror(e));
		return e;
	}
	pid = fork();
	if (pid == 0)
		in_container(ns, tree, copy, pipefd[1]);
	close(ns);
	close(pipefd[1]);
	if (pid < 0) {
		e = errno;
		close(pipefd[0]);
		snprintf(why, MOUNTS_WHY_MAX, "fork: %s", strerror(e));
		return e;
	}
	/* A few system calls: waited for here, as crun's start is. */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	n = read(pipefd[0], msg, sizeof(msg) - 1);
	close(pipefd[0]);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	msg[n > 0 ? n : 0] = '\0';
	e = (int)strtol(msg, NULL, 10);
	snprintf(why, MOUNTS_WHY_MAX, "%s", n > 0 && strchr(msg, ' ') ? strchr(msg, ' ') + 1
								       : "the mount helper failed");
	return e > 0 ? e : EIO;
}

static const char *request_problem(const struct proto_msg *m)
{
	const char *path = m->u.mount.path;

	if (m->type == PROTO_MOUNT && !shares_tag_valid(m->u.mount.tag, strlen(m->u.mount.tag)))
		return "bad share tag";
	return shares_path_problem(path, strlen(path));
}

int mounts_unbind(struct guest *g, const char *path, char *why)
{
	return run_in_container(g, -1, path, why);
}

int mounts_check(struct guest *g, const char *path, char *why)
{
	return run_in_container(g, CHECK_TREE, path, why);
}

int mounts_bind(struct guest *g, const char *tag, bool ro, const char *path, char *why)
{
	char source[sizeof(SHARES_MOUNT_DIR) + SHARE_TAG_MAX + 2];
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	int tree, e;

	if ((e = -mounts_hub()) > 0) {
		snprintf(why, MOUNTS_WHY_MAX, "mount the share hub: %s", strerror(e));
		return e;
	}
	snprintf(source, sizeof(source), "%s/%s", SHARES_MOUNT_DIR, tag);
	if (ro)
		attr.attr_set |= MOUNT_ATTR_RDONLY;
	tree = open_tree(AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
	if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
		e = errno;
		snprintf(why, MOUNTS_WHY_MAX, "%s share `%s`: %s", tree < 0 ? "open" : "set up", tag,
			 strerror(e));
	} else {
		e = run_in_container(g, tree, path, why);
	}
	if (tree >= 0)
		close(tree);
	return e;
}

void mounts_request(struct guest *g, const struct proto_msg *m)
{
	char why[MOUNTS_WHY_MAX] = "";
	const char *problem = request_problem(m);
	int e;

	if (problem) {
		snprintf(why, sizeof(why), "path: %s", problem);
		return done(g, m->u.mount.id, EINVAL, why);
	}
	if (m->type == PROTO_UNMOUNT)
		e = mounts_unbind(g, m->u.mount.path, why);
	else
		e = mounts_bind(g, m->u.mount.tag, m->u.mount.flags & PROTO_MOUNT_RO,
				m->u.mount.path, why);
	done(g, m->u.mount.id, e, e ? why : NULL);
}
