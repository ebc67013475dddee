/* libFuzzer target for the share server (share/server.h): sequences of
 * FUSE requests from a hostile guest against one rw and one ro export of a
 * scratch tree, with a canary directory beside them.
 *
 * Input: up to FZ_MAX_REQS requests, each
 *   u8 opcode, u8 node (0 hub, 1 rw root, 2 ro root, 0xff: a raw u64
 *   follows, else one of the node ids replies gave), u8 flags (bit 0: put a
 *   handle a reply gave at the opcode's fh offset; bit 1: put a node id
 *   there instead, for LINK/RENAME's other node; bit 2: make WRITE's size
 *   its payload's; bit 3: a raw u32 in.len follows; bits 4-7: writable room,
 *   0 full, else 2^(n+2) bytes), u8 pick (which handle or node), u8 cut
 *   (where the readable side splits), u16 args length, the args.
 * Each reply must be well framed (out.len is what fs_server_handle
 * returned, the unique echoed, an error negative with no payload); after
 * each input, the canary and the ro export must be as they were, and the
 * rw export (nogit) must hold one .git, its own (d/.git, or wherever a
 * rename of d took it), as it was. Each input
 * starts from a fresh rw tree and a fresh session (DESTROY, INIT).
 * Seeds: tests/fuzz/corpus/fuse, written by tests/fuzz/mkcorpus.py. */
#include <fcntl.h>
#include <ftw.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "share/server.h"

#define FZ_MAX_REQS  64
#define FZ_MAX_ARGS  8192
#define FZ_KNOWN     16
#define FZ_ROUTE     7
#define FZ_MAX_NODES 64		   /* small, so ENFILE is reached */
#define FZ_MAX_ALLOC (1024 * 1024) /* FALLOCATE bounded: the scratch tree is real disk */

static struct fs_server *srv;
static char scratch[256];
static char *canary_was, *ro_was, *git_was;
static uint64_t rw_root, ro_root, unique;
static uint64_t nodes[FZ_KNOWN], fhs[FZ_KNOWN];
static unsigned nr_nodes, nr_fhs;
static uint8_t out[FS_MAX_REQUEST];

static char *at(const char *rel)
{
	static char buf[4][512];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", scratch, rel);
	return buf[i];
}

static void put(const char *rel, const char *data)
{
	int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	check(fd >= 0);
	check(write(fd, data, strlen(data)) == (ssize_t)strlen(data));
	close(fd);
}

static void tree(const char *rel)
{
	char p[600];

	snprintf(p, sizeof(p), "%s/d", rel);
	check(mkdir(at(p), 0755) == 0);
	snprintf(p, sizeof(p), "%s/f", rel);
	put(p, "hello");
	snprintf(p, sizeof(p), "%s/d/x", rel);
	put(p, "x");
	snprintf(p, sizeof(p), "%s/l", rel);
	check(symlink("../canary/secret", at(p)) == 0);
	snprintf(p, sizeof(p), "%s/fifo", rel);
	check(mkfifo(at(p), 0644) == 0);
	snprintf(p, sizeof(p), "%s/d/.git", rel);
	check(mkdir(at(p), 0755) == 0);
	snprintf(p, sizeof(p), "%s/d/.git/config", rel);
	put(p, "[core]");
}

static char git_at[512];
static int git_found;

static int find_git(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag;
	if (strcmp(p + f->base, ".git") == 0 && git_found++ == 0)
		snprintf(git_at, sizeof(git_at), "%s", p + strlen(scratch) + 1);
	return 0;
}

static FILE *list_out;
static size_t list_root; /* the listed directory's length: names are relative to it */

static int list_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	char buf[256];
	ssize_t n = 0;
	int fd;

	(void)flag, (void)f;
	fprintf(list_out, "%s %o %lld %lld.%ld|", p + list_root, st->st_mode, (long long)st->st_size,
		(long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	if (S_ISREG(st->st_mode) && (fd = open(p, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf));
		close(fd);
	}
	if (n > 0)
		fwrite(buf, 1, (size_t)n, list_out);
	fputs("|\n", list_out);
	return 0;
}

static char *listing(const char *rel)
{
	char *s = NULL;
	size_t len = 0;

	list_root = strlen(at(rel));
	list_out = open_memstream(&s, &len);
	check(nftw(at(rel), list_one, 16, FTW_PHYS) == 0);
	fclose(list_out);
	return s;
}

static int open_up(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_D || flag == FTW_DNR || S_ISDIR(st->st_mode))
		chmod(p, 0700);
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag;
	return f->level == 0 ? 0 : remove(p);
}

/* The rw export back to its first state: its root's mode and xattrs too,
 * so that no input depends on the ones before it. */
static void reset_rw(void)
{
	char names[4096];
	ssize_t n;

	nftw(at("rw"), open_up, 16, FTW_PHYS);
	check(nftw(at("rw"), rm_one, 16, FTW_DEPTH | FTW_PHYS) == 0);
	check(chmod(at("rw"), 0755) == 0);
	n = listxattr(at("rw"), names, sizeof(names));
	for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1)
		removexattr(at("rw"), names + i);
	tree("rw");
}

static size_t send(const void *req, size_t len, size_t cut, size_t room, int *error)
{
	struct iovec in[2] = { { (void *)req, MIN(cut, len) },
			       { (uint8_t *)req + MIN(cut, len), 0 } };
	struct iovec o[2] = { { out, MIN(room, (size_t)5) }, { out + MIN(room, (size_t)5), 0 } };
	const struct fuse_out_header *oh = (const void *)out;
	unsigned int route;
	size_t ret;

	in[1].iov_len = len - in[0].iov_len;
	o[1].iov_len = room - o[0].iov_len;
	memset(out, 0x5a, sizeof(*oh));
	/* Routed (share/routes.h): here, everywhere, the share behind by its
	 * tag, or the server its node id names. */
	route = fs_server_route(srv, in, 2);
	check(route == 0 || route == FS_ROUTE_ALL || route == FZ_ROUTE ||
	      (len >= sizeof(struct fuse_in_header) &&
	       route == ((const struct fuse_in_header *)req)->nodeid >> FS_ROUTE_SHIFT));
	ret = fs_server_handle(srv, in, 2, o, 2);
	*error = 1;
	if (ret == 0)
		return 0;
	check(ret >= sizeof(*oh) && ret <= room);
	check(oh->len == ret);
	check(len < sizeof(struct fuse_in_header) ||
	      oh->unique == ((const struct fuse_in_header *)req)->unique);
	check(oh->error <= 0 && oh->error > -4096);
	check(oh->error == 0 || ret == sizeof(*oh));
	*error = oh->error;
	return ret - sizeof(*oh);
}

static void simple(uint32_t op, uint64_t node, const void *arg, size_t len)
{
	uint8_t req[256];
	struct fuse_in_header h = {
		.len = (uint32_t)(sizeof(h) + len), .opcode = op, .unique = ++unique, .nodeid = node
	};
	int err;

	memcpy(req, &h, sizeof(h));
	memcpy(req + sizeof(h), arg, len);
	send(req, h.len, h.len, sizeof(out), &err);
	if (op == FUSE_LOOKUP) {
		check(err == 0);
		if (strcmp(arg, "rw") == 0)
			rw_root = ((const struct fuse_entry_out *)(out + 16))->nodeid;
		else
			ro_root = ((const struct fuse_entry_out *)(out + 16))->nodeid;
	}
}

static void session(void)
{
	struct fuse_init_in in = {
		.major = 7, .minor = 38, .max_readahead = 1 << 20, .flags = 0xffffffff
	};

	simple(FUSE_DESTROY, 0, "", 0);
	simple(FUSE_INIT, 0, &in, sizeof(in));
	simple(FUSE_LOOKUP, FUSE_ROOT_ID, "rw", 3);
	simple(FUSE_LOOKUP, FUSE_ROOT_ID, "ro", 3);
	nr_nodes = nr_fhs = 0;
}

static int rm_all(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static void cleanup(void)
{
	nftw(scratch, open_up, 16, FTW_PHYS);
	nftw(scratch, rm_all, 16, FTW_DEPTH | FTW_PHYS);
}

static void setup(void)
{
	struct fs_export_opts rw = { .no_git = true }, ro = { .ro = true };
	const char *tmp = getenv("TMPDIR");
	int fd;

	umask(0);
	snprintf(scratch, sizeof(scratch), "%s/gantry-fuzz-fuse-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	check(mkdtemp(scratch));
	atexit(cleanup);
	check(mkdir(at("rw"), 0755) == 0 && mkdir(at("ro"), 0755) == 0);
	check(mkdir(at("canary"), 0755) == 0);
	put("canary/secret", "top secret");
	tree("rw");
	tree("ro");
	check(fs_server_new(&srv, FZ_MAX_NODES, 0, NULL) == 0);
	fd = open(at("rw"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	check(fs_server_add_export(srv, "rw", fd, &rw, NULL) == 0);
	close(fd);
	fd = open(at("ro"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	check(fs_server_add_export(srv, "ro", fd, &ro, NULL) == 0);
	close(fd);
	/* A share served behind this server: listed in the hub, never here. */
	check(fs_server_add_remote(srv, "live", FZ_ROUTE, NULL) == 0);
	canary_was = listing("canary");
	ro_was = listing("ro");
}

/* Where an opcode's arguments carry a handle. */
static int fh_offset(uint32_t op)
{
	switch (op) {
	case FUSE_GETATTR:
	case FUSE_SETATTR:
		return 8;
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
	case FUSE_FSYNC:
	case FUSE_FSYNCDIR:
	case FUSE_FALLOCATE:
	case FUSE_LSEEK:
	case FUSE_READDIR:
	case FUSE_READDIRPLUS:
		return 0;
	default:
		return -1;
	}
}

/* Remember what a reply handed out, for later requests to name. */
static void learn(uint32_t op, size_t len)
{
	const uint8_t *p = out + sizeof(struct fuse_out_header);

	if ((op == FUSE_LOOKUP || op == FUSE_MKDIR || op == FUSE_MKNOD || op == FUSE_SYMLINK ||
	     op == FUSE_LINK || op == FUSE_CREATE) &&
	    len >= sizeof(struct fuse_entry_out))
		nodes[nr_nodes++ % FZ_KNOWN] = ((const struct fuse_entry_out *)p)->nodeid;
	if (op == FUSE_CREATE &&
	    len >= sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out))
		fhs[nr_fhs++ % FZ_KNOWN] =
			((const struct fuse_open_out *)(p + sizeof(struct fuse_entry_out)))->fh;
	if ((op == FUSE_OPEN || op == FUSE_OPENDIR) && len >= sizeof(struct fuse_open_out))
		fhs[nr_fhs++ % FZ_KNOWN] = ((const struct fuse_open_out *)p)->fh;
}

static uint64_t pick_node(struct fuzz_in *f, uint8_t sel)
{
	uint64_t v;

	if (sel == 0)
		return FUSE_ROOT_ID;
	if (sel == 1)
		return rw_root;
	if (sel == 2)
		return ro_root;
	if (sel == 0xff) {
		v = fuzz_take(f, 4);
		return v | (uint64_t)fuzz_take(f, 4) << 32;
	}
	return nr_nodes ? nodes[sel % MIN(nr_nodes, (unsigned)FZ_KNOWN)] : rw_root;
}

static void one(struct fuzz_in *f, uint8_t *req)
{
	struct fuse_in_header h = { .unique = ++unique };
	uint8_t flags, pick, cut;
	size_t alen, room, len;
	int off, err;

	h.opcode = fuzz_take8(f);
	h.nodeid = pick_node(f, fuzz_take8(f));
	flags = fuzz_take8(f);
	pick = fuzz_take8(f);
	cut = fuzz_take8(f);
	alen = fuzz_take(f, 2); /* not inside MIN(), which evaluates twice */
	alen = MIN(alen, (size_t)FZ_MAX_ARGS);
	memset(req + sizeof(h), 0, alen);
	for (size_t i = 0; i < alen; i++)
		req[sizeof(h) + i] = fuzz_take8(f);
	len = sizeof(h) + alen;
	h.len = (uint32_t)len;
	off = fh_offset(h.opcode);
	if ((flags & 1) && nr_fhs && off >= 0 && (size_t)off + 8 <= alen)
		memcpy(req + sizeof(h) + off, &fhs[pick % MIN(nr_fhs, (unsigned)FZ_KNOWN)], 8);
	if ((flags & 2) && alen >= 8) {
		uint64_t n = pick_node(f, pick);

		memcpy(req + sizeof(h), &n, 8);
	}
	if ((flags & 4) && h.opcode == FUSE_WRITE && alen >= sizeof(struct fuse_write_in)) {
		uint32_t size = (uint32_t)(alen - sizeof(struct fuse_write_in));

		memcpy(req + sizeof(h) + offsetof(struct fuse_write_in, size), &size, 4);
	}
	if (h.opcode == FUSE_FALLOCATE && alen >= sizeof(struct fuse_fallocate_in)) {
		struct fuse_fallocate_in *fa = (void *)(req + sizeof(h));

		fa->offset %= FZ_MAX_ALLOC;
		fa->length %= FZ_MAX_ALLOC;
	}
	if (flags & 8)
		h.len = fuzz_take(f, 4);
	memcpy(req, &h, sizeof(h));
	room = (flags >> 4) ? MIN((size_t)4 << (flags >> 4), sizeof(out)) : sizeof(out);
	len = send(req, len, cut ? cut : len, room, &err);
	if (err == 0)
		learn(h.opcode, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t *req;
	struct fuzz_in f = { data, size };
	char *now;

	if (!srv) {
		setup();
		req = xmalloc(sizeof(struct fuse_in_header) + FZ_MAX_ARGS);
	}
	reset_rw();
	free(git_was);
	git_was = listing("rw/d/.git");
	session();
	for (int i = 0; i < FZ_MAX_REQS && f.left; i++)
		one(&f, req);
	now = listing("canary");
	check(strcmp(now, canary_was) == 0);
	free(now);
	now = listing("ro");
	check(strcmp(now, ro_was) == 0);
	free(now);
	git_found = 0;
	check(nftw(at("rw"), find_git, 16, FTW_PHYS) == 0 && git_found == 1);
	now = listing(git_at);
	check(strcmp(now, git_was) == 0);
	free(now);
	return 0;
}
