/* A small FUSE client for the share server's tests: it builds requests the
 * way the Linux driver lays them out (header and arguments readable, room
 * for the reply writable), splits each side over two descriptors at odd
 * places, calls fs_server_handle and checks the reply's framing: out.len is
 * what was returned, the unique is echoed, an error has no payload. Also a
 * fixture: a temp tree with the shared directories and a canary beside
 * them, and a listing of a tree (names, modes, sizes, times, contents) to
 * show it unchanged. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_SHARE_CLIENT_H
#define GANTRY_TESTS_UNIT_SHARE_CLIENT_H

#include <fcntl.h>
#include <ftw.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "share/server.h"

#define CL_OUT (FS_MAX_WRITE + 4096)

struct part {
	const void *p;
	size_t n;
};

struct cl {
	struct fs_server *s;
	uint64_t unique;
	char root[200];
	uint8_t out[CL_OUT];
	size_t out_room;    /* writable bytes offered; 0: CL_OUT */
	const uint8_t *rep; /* reply payload */
	size_t rep_len;
	size_t ret;		/* what fs_server_handle returned */
	uint64_t rw, ro, other; /* export roots' node ids */
};

#define STR(s)                                                                                     \
	{                                                                                          \
		(s), strlen(s) + 1                                                                 \
	}
#define ARG(x)                                                                                     \
	{                                                                                          \
		&(x), sizeof(x)                                                                    \
	}

/* One request from parts; returns 0, a negative errno, or 1: no reply. */
static int cl_send_raw(struct cl *c, const void *req, size_t len)
{
	struct iovec in[2], out[2];
	size_t cut = len > 7 ? 7 : len, room = c->out_room ? c->out_room : CL_OUT;
	const struct fuse_out_header *oh = (const void *)c->out;
	const struct fuse_in_header *ih = req;

	in[0] = (struct iovec){ (void *)req, cut };
	in[1] = (struct iovec){ (uint8_t *)req + cut, len - cut };
	out[0] = (struct iovec){ c->out, room > 10 ? 10 : room };
	out[1] = (struct iovec){ c->out + out[0].iov_len, room - out[0].iov_len };
	memset(c->out, 0xa5, sizeof(struct fuse_out_header));
	c->ret = fs_server_handle(c->s, in, 2, out, 2);
	c->rep = c->out + sizeof(*oh);
	c->rep_len = 0;
	if (c->ret == 0)
		return 1;
	assert_true(c->ret >= sizeof(*oh) && c->ret <= room);
	assert_int_equal(oh->len, c->ret);
	if (len >= sizeof(*ih))
		assert_int_equal(oh->unique, ih->unique);
	assert_true(oh->error <= 0 && oh->error > -4096);
	if (oh->error)
		assert_int_equal(oh->len, sizeof(*oh));
	c->rep_len = c->ret - sizeof(*oh);
	return oh->error;
}

static int cl_call(struct cl *c, uint32_t op, uint64_t node, const struct part *parts)
{
	cleanup_free uint8_t *buf = NULL;
	struct fuse_in_header h = { .opcode = op, .nodeid = node, .unique = ++c->unique };
	size_t len = sizeof(h);

	for (const struct part *p = parts; p && p->p; p++)
		len += p->n;
	buf = xmalloc(len);
	h.len = (uint32_t)len;
	memcpy(buf, &h, sizeof(h));
	len = sizeof(h);
	for (const struct part *p = parts; p && p->p; p++) {
		memcpy(buf + len, p->p, p->n);
		len += p->n;
	}
	return cl_send_raw(c, buf, len);
}

#define CALL(c, op, node, ...) cl_call(c, op, node, (const struct part[]){ __VA_ARGS__, { 0 } })
#define CALL0(c, op, node)     cl_call(c, op, node, NULL)

static void cl_init(struct cl *c)
{
	struct fuse_init_in in = {
		.major = 7,
		.minor = 38,
		.max_readahead = 65536,
		.flags = 0xffffffff,
	};

	assert_int_equal(CALL(c, FUSE_INIT, 0, ARG(in)), 0);
}

/* Returns the node id, or a negative errno. */
/* The node of name in dir, or a negative errno: a negative entry (node
 * 0, the server's answer for a name that is not there) is -ENOENT. */
static int64_t cl_lookup(struct cl *c, uint64_t dir, const char *name)
{
	int ret = CALL(c, FUSE_LOOKUP, dir, STR(name));
	uint64_t id;

	if (ret)
		return ret;
	id = ((const struct fuse_entry_out *)c->rep)->nodeid;
	return id ? (int64_t)id : -ENOENT;
}

static const struct fuse_attr *cl_attr(struct cl *c, uint64_t node)
{
	struct fuse_getattr_in in = { 0 };

	assert_int_equal(CALL(c, FUSE_GETATTR, node, ARG(in)), 0);
	return &((const struct fuse_attr_out *)c->rep)->attr;
}

/* OPEN (or OPENDIR): the fh, or a negative errno. */
static int64_t cl_open(struct cl *c, uint32_t op, uint64_t node, uint32_t flags)
{
	struct fuse_open_in in = { .flags = flags };
	int ret = CALL(c, op, node, ARG(in));

	return ret ? ret : (int64_t)((const struct fuse_open_out *)c->rep)->fh;
}

/* CREATE: node id and *fh, or a negative errno. */
static int64_t cl_create(struct cl *c, uint64_t dir, const char *name, uint32_t flags,
			 uint32_t mode, uint64_t *fh)
{
	struct fuse_create_in in = { .flags = flags, .mode = S_IFREG | mode };
	const struct fuse_entry_out *e;
	int ret = CALL(c, FUSE_CREATE, dir, ARG(in), STR(name));

	if (ret)
		return ret;
	e = (const void *)c->rep;
	*fh = ((const struct fuse_open_out *)(e + 1))->fh;
	return (int64_t)e->nodeid;
}

static int cl_write(struct cl *c, uint64_t node, uint64_t fh, uint64_t off, const char *data)
{
	struct fuse_write_in in = { .fh = fh, .offset = off, .size = (uint32_t)strlen(data) };

	return CALL(c, FUSE_WRITE, node, ARG(in), { data, strlen(data) });
}

/* READ into c->rep; returns bytes or a negative errno. */
static int cl_read(struct cl *c, uint64_t node, uint64_t fh, uint64_t off, uint32_t size)
{
	struct fuse_read_in in = { .fh = fh, .offset = off, .size = size };
	int ret = CALL(c, FUSE_READ, node, ARG(in));

	return ret ? ret : (int)c->rep_len;
}

static int cl_release(struct cl *c, uint32_t op, uint64_t node, uint64_t fh)
{
	struct fuse_release_in in = { .fh = fh };

	return CALL(c, op, node, ARG(in));
}

static int cl_setattr(struct cl *c, uint64_t node, const struct fuse_setattr_in *in)
{
	return CALL(c, FUSE_SETATTR, node, { in, sizeof(*in) });
}

static int cl_forget(struct cl *c, uint64_t node, uint64_t n)
{
	struct fuse_forget_in in = { .nlookup = n };

	return CALL(c, FUSE_FORGET, node, ARG(in));
}

/* ---- the fixture's tree ---- */

static char *cl_path(struct cl *c, const char *rel)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", c->root, rel);
	return buf[i];
}

static void cl_put(struct cl *c, const char *rel, const char *data)
{
	int fd = open(cl_path(c, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	close(fd);
}

static char *cl_get(struct cl *c, const char *rel)
{
	static char buf[4096];
	int fd = open(cl_path(c, rel), O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n < 0 ? 0 : n] = 0;
	return buf;
}

static FILE *tree_out;

static int tree_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	char buf[4096];
	ssize_t n = 0;
	int fd;

	(void)flag, (void)f;
	fprintf(tree_out, "%s %o %lld %lld.%ld %lld |", p, st->st_mode, (long long)st->st_size,
		(long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (long long)st->st_ino);
	if (S_ISLNK(st->st_mode))
		n = readlink(p, buf, sizeof(buf));
	else if (S_ISREG(st->st_mode) && (fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	if (n > 0)
		fwrite(buf, 1, (size_t)n, tree_out);
	fputs("|\n", tree_out);
	return 0;
}

/* Everything the tree holds, as text (free it). */
static char *cl_tree(struct cl *c, const char *rel)
{
	char *s = NULL;
	size_t len = 0;

	tree_out = open_memstream(&s, &len);
	assert_int_equal(nftw(cl_path(c, rel), tree_one, 16, FTW_PHYS), 0);
	fclose(tree_out);
	return s;
}

/* root/{share,other,canary}: share is exported rw as "rw" and ro as "ro",
 * other rw as "other"; canary is beside them, outside every export. */
static struct cl *cl_new(size_t max_nodes)
{
	struct cl *c = xzalloc(sizeof(*c));
	struct fs_export_opts rw = { 0 }, ro = { .ro = true };
	const char *tmp = getenv("TMPDIR");
	gantry_error_t err = NULL;
	int fd;

	umask(0);
	snprintf(c->root, sizeof(c->root), "%s/gantry-share-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(c->root));
	assert_int_equal(mkdir(cl_path(c, "share"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "share/d"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "other"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "canary"), 0755), 0);
	assert_int_equal(mkdir(cl_path(c, "canary/sub"), 0755), 0);
	cl_put(c, "share/f", "hello");
	cl_put(c, "share/d/x", "x");
	cl_put(c, "other/g", "g");
	cl_put(c, "canary/secret", "top secret");
	cl_put(c, "canary/sub/deep", "deep");
	assert_int_equal(symlink("secret", cl_path(c, "canary/link")), 0);
	assert_int_equal(fs_server_new(&c->s, max_nodes, 0, &err), 0);
	fd = open(cl_path(c, "share"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fs_server_add_export(c->s, "rw", fd, &rw, &err), 0);
	assert_int_equal(fs_server_add_export(c->s, "ro", fd, &ro, &err), 0);
	close(fd);
	fd = open(cl_path(c, "other"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_int_equal(fs_server_add_export(c->s, "other", fd, &rw, &err), 0);
	close(fd);
	cl_init(c);
	c->rw = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "rw");
	c->ro = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "ro");
	c->other = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "other");
	assert_true(c->rw > 1 && c->ro > 1 && c->other > 1 && c->rw != c->ro);
	return c;
}

static int cl_rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)flag, (void)f;
	if (S_ISDIR(st->st_mode))
		chmod(p, 0755);
	return remove(p);
}

static void cl_free(struct cl *c)
{
	fs_server_free(c->s);
	nftw(c->root, cl_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	free(c);
}

/* ---- a test's fixture: the client and the canary as it was ---- */

struct fx {
	struct cl *c;
	char *canary;
};

static int setup(void **state)
{
	struct fx *f = xzalloc(sizeof(*f));

	f->c = cl_new(0);
	f->canary = cl_tree(f->c, "canary");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	free(f->canary);
	cl_free(f->c);
	free(f);
	return 0;
}

static void canary_same(struct fx *f)
{
	cleanup_free char *now = cl_tree(f->c, "canary");

	assert_string_equal(now, f->canary);
}

#define FX()                                                                                       \
	struct fx *f = *state;                                                                     \
	struct cl *c = f->c

#endif
