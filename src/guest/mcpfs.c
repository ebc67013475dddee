/* The MCP gateway's built-in fs server (gantry.mcpfs=ROOT,UID,GID): its
 * tools' work, done in the guest. The relay process (sockets.c) listens
 * on SOCKETS_DIR/mcpfs, bound into the container at PROTO_MCP_FS_SOCKET,
 * where `gantry-guest mcp-proxy` carries each of the gateway's requests;
 * each connection gets a child of its own that enters the caller's mount
 * namespace, shuts itself in ROOT (chroot), becomes UID:GID with no
 * supplementary groups and no way to gain privilege, and only then reads
 * the one request and answers it (proto/agent.h has both lines). A
 * request it does not take, a path it may not read, a file over
 * PROTO_MCP_FS_MAX: an "err" answer. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/guest.h"
#include "proto/agent.h"
#include "proto/base64.h"

#define MCPFS_READ_MS	 10000
#define MCPFS_REQUEST_MAX 8192
#define MCPFS_ENTRIES_MAX 10000

bool mcpfs_parse(struct guest_mcpfs *fs, const char *value, char why[SHARE_WHY_MAX])
{
	char path[SHARE_PATH_MAX + 1];
	const char *comma = strchr(value, ','), *problem;
	unsigned long uid, gid;
	char *end;
	long n;

	if (comma == NULL) {
		snprintf(why, SHARE_WHY_MAX, "not ROOT,UID,GID");
		return false;
	}
	n = shares_b64url_decode(value, (size_t)(comma - value), path, sizeof(path));
	/* The container's own root is the default, where a share's path
	 * may not be. */
	problem = n < 0 ? "not base64url" :
		  n > 0 && strspn(path, "/") == (size_t)n ? NULL :
							  shares_path_problem(path, (size_t)n);
	if (problem) {
		snprintf(why, SHARE_WHY_MAX, "ROOT: %s", problem);
		return false;
	}
	errno = 0;
	uid = strtoul(comma + 1, &end, 10);
	if (errno || *end != ',' || end == comma + 1 || uid == 0 || uid > 0xfffffffeUL) {
		snprintf(why, SHARE_WHY_MAX, "UID: not a user id other than root's");
		return false;
	}
	gid = strtoul(end + 1, &end, 10);
	if (errno || *end != '\0' || gid == 0 || gid > 0xfffffffeUL) {
		snprintf(why, SHARE_WHY_MAX, "GID: not a group id other than root's");
		return false;
	}
	memcpy(fs->root, path, (size_t)n + 1);
	fs->uid = (uid_t)uid;
	fs->gid = (gid_t)gid;
	fs->on = true;
	return true;
}

static void __attribute__((noreturn)) answer_err(int fd, const char *seq, const char *why)
{
	char line[256];
	int n = snprintf(line, sizeof(line), "%c%s err %s\n", PROTO_MCP_FS_MARK, seq, why);
	(void)!write(fd, line, n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1);
	_exit(1);
}

/* "\x1eSEQ ok B64\n" of data. */
static void __attribute__((noreturn)) answer_ok(int fd, const char *seq, const char *data,
						size_t len)
{
	size_t head = strlen(seq) + 5, cap = head + b64_encoded_len(len, B64_URL) + 2;
	char *line = malloc(cap);

	if (line == NULL)
		answer_err(fd, seq, "out of memory");
	snprintf(line, cap, "%c%s ok ", PROTO_MCP_FS_MARK, seq);
	b64_encode(data, len, line + head, B64_URL);
	strcat(line + head, "\n");
	if (guest_write_all(fd, line, strlen(line)) < 0)
		_exit(1);
	_exit(0);
}

static void __attribute__((noreturn)) do_read(int fd, const char *seq, const char *path)
{
	char *buf = malloc(PROTO_MCP_FS_MAX + 1);
	struct stat st;
	size_t got = 0;
	ssize_t n;
	int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (f < 0)
		answer_err(fd, seq, strerror(errno));
	if (fstat(f, &st) < 0)
		answer_err(fd, seq, strerror(errno));
	if (!S_ISREG(st.st_mode))
		answer_err(fd, seq, S_ISDIR(st.st_mode) ? "a directory (list_directory lists it)" :
							  "not a regular file");
	if (buf == NULL)
		answer_err(fd, seq, "out of memory");
	while (got <= PROTO_MCP_FS_MAX && (n = read(f, buf + got, PROTO_MCP_FS_MAX + 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			answer_err(fd, seq, strerror(errno));
		got += (size_t)n;
	}
	if (got > PROTO_MCP_FS_MAX)
		answer_err(fd, seq, "larger than 512 KiB");
	answer_ok(fd, seq, buf, got);
}

/* Lines "[KIND] name\n", by name. */
static int by_name(const void *a, const void *b)
{
	return strcmp(strchr(*(char *const *)a, ' '), strchr(*(char *const *)b, ' '));
}

/* "[DIR] name", "[FILE] name", "[LINK] name" or "[OTHER] name" lines,
 * by name. */
static void __attribute__((noreturn)) do_list(int fd, const char *seq, const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char **v = NULL, *text;
	size_t n = 0, len = 0;

	if (d == NULL)
		answer_err(fd, seq, strerror(errno));
	while ((e = readdir(d)) != NULL) {
		const char *kind = e->d_type == DT_DIR ? "DIR" : e->d_type == DT_REG ? "FILE" :
				   e->d_type == DT_LNK ? "LINK" : "OTHER";
		char **grown;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == MCPFS_ENTRIES_MAX)
			answer_err(fd, seq, "more than 10000 entries");
		grown = realloc(v, (n + 1) * sizeof(*v));
		if (grown == NULL || asprintf(&grown[n], "[%s] %s\n", kind, e->d_name) < 0)
			answer_err(fd, seq, "out of memory");
		v = grown;
		len += strlen(v[n++]);
		if (len > PROTO_MCP_FS_MAX)
			answer_err(fd, seq, "a listing larger than 512 KiB");
	}
	qsort(v, n, sizeof(*v), by_name);
	text = malloc(len + 1);
	if (text == NULL)
		answer_err(fd, seq, "out of memory");
	text[0] = '\0';
	for (size_t i = 0, at = 0; i < n; i++) {
		size_t k = strlen(v[i]);

		memcpy(text + at, v[i], k + 1);
		at += k;
	}
	answer_ok(fd, seq, text, len);
}

/* The caller's view, shut in the root as the user: 0, or why not. */
static const char *confine(const struct guest_mcpfs *fs, int conn)
{
	struct ucred cred;
	socklen_t l = sizeof(cred);
	struct stat theirs, ours;
	char ns[64];
	int nsfd;

	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &l) < 0 || cred.pid <= 0)
		return "no caller";
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)cred.pid);
	nsfd = open(ns, O_RDONLY | O_CLOEXEC);
	/* Only a container's process: a caller gone, its pid taken since
	 * by one of gantry-init's (outside any container), gets nothing. */
	if (nsfd < 0 || fstat(nsfd, &theirs) < 0 || stat("/proc/self/ns/mnt", &ours) < 0 ||
	    (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino))
		return "not a container's process";
	if (setns(nsfd, CLONE_NEWNS) < 0)
		return "cannot enter the caller's mount namespace";
	close(nsfd);
	if (chdir(fs->root) < 0 || chroot(".") < 0 || chdir("/") < 0)
		return "no such fs root";
	if (setgroups(0, NULL) < 0 || setgid(fs->gid) < 0 || setuid(fs->uid) < 0 ||
	    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return "cannot become its user";
	return NULL;
}

void __attribute__((noreturn)) mcpfs_serve(const struct guest_mcpfs *fs, int conn)
{
	char req[MCPFS_REQUEST_MAX + 1], path[SHARE_PATH_MAX + 1], seq[24] = "0";
	const char *why = confine(fs, conn), *op, *arg;
	size_t got = 0, k;
	long n;

	while (got < MCPFS_REQUEST_MAX && !memchr(req, '\n', got)) {
		struct pollfd p = { .fd = conn, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, MCPFS_READ_MS) <= 0)
			_exit(1);
		r = read(conn, req + got, MCPFS_REQUEST_MAX - got);
		if (r <= 0)
			_exit(1);
		got += (size_t)r;
	}
	req[got] = '\0';
	if (req[0] != PROTO_MCP_FS_MARK || !memchr(req, '\n', got))
		_exit(1);
	req[strcspn(req, "\n")] = '\0';
	k = strspn(req + 1, "0123456789");
	if (k == 0 || k >= sizeof(seq) || req[1 + k] != ' ')
		_exit(1);
	memcpy(seq, req + 1, k);
	seq[k] = '\0';
	if (why)
		answer_err(conn, seq, why);
	op = req + 2 + k;
	arg = strchr(op, ' ');
	if (arg == NULL)
		answer_err(conn, seq, "no path");
	n = shares_b64url_decode(arg + 1, strlen(arg + 1), path, sizeof(path));
	if (n < 0 || n == 0 || memchr(path, '\0', (size_t)n))
		answer_err(conn, seq, "not a path");
	if (strncmp(op, "read ", 5) == 0)
		do_read(conn, seq, path);
	if (strncmp(op, "list ", 5) == 0)
		do_list(conn, seq, path);
	answer_err(conn, seq, "no such request");
}
