/* Tests for image/{tree,erofs,layer}.c: layers are written here with
 * libarchive, applied with the real API, and every image is read back three
 * ways: the independent reader in erofs/reader.c (xattrs, hardlink identity,
 * directory format), fsck.erofs, and fsck.erofs --extract --preserve compared
 * entry by entry with what the layers say. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "erofs/layers.h"
#include "erofs/reader.h"
#include "image/erofs.h"
#include "skip.h"

/* The entry tables name only the fields that matter; the rest are zero. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#define BIG_FILE_SIZE (100 * MiB)
#define BIG_DIR_N     10000
#define DEEP_LEVELS   100

struct ctx {
	char *dir;
	char **paths; /* handed out by at(), freed by teardown */
	size_t npaths;
};

static int setup(void **state)
{
	struct ctx *c = xzalloc(sizeof(*c));
	const char *tmp = getenv("TMPDIR");

	xasprintf(&c->dir, "%s/gantry-erofs-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(c->dir) == NULL)
		return -1;
	*state = c;
	return 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st, (void)flag, (void)f;
	return remove(p);
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	char *mnt;

	/* a failed assertion may leave check_image's kernel mount behind */
	xasprintf(&mnt, "%s/x.mnt", c->dir);
	umount2(mnt, MNT_DETACH);
	free(mnt);
	nftw(c->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	for (size_t i = 0; i < c->npaths; i++)
		free(c->paths[i]);
	free(c->paths);
	free(c->dir);
	free(c);
	return 0;
}

/* A path in the test's directory, valid until teardown. */
static char *at(void **state, const char *name)
{
	struct ctx *c = *state;

	c->paths = xrealloc(c->paths, (c->npaths + 1) * sizeof(*c->paths));
	xasprintf(&c->paths[c->npaths], "%s/%s", c->dir, name);
	return c->paths[c->npaths++];
}

static void finish(bool checked)
{
	if (!checked)
		skip_because("only the independent reader checked the image (why: the line above)");
}

/* Names in the test directory, sorted, comma-separated. */
static char *listing(void **state)
{
	struct ctx *c = *state;
	struct dirent **v;
	char *out = xstrdup("");
	int n = scandir(c->dir, &v, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		char *next;

		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			xasprintf(&next, "%s%s,", out, v[i]->d_name), free(out), out = next;
		free(v[i]);
	}
	free(v);
	return out;
}

static char *repeat(char ch, size_t n)
{
	char *s = xmalloc(n + 1);

	memset(s, ch, n);
	s[n] = '\0';
	return s;
}

/* vfs_cap_data revision 2: cap_net_bind_service permitted */
static const char capability[20] = "\x01\0\0\x02\0\x04";
/* POSIX ACL xattr v2: user::rwx group::r-x other::r-x */
static const char acl[28] = "\x02\0\0\0"
			    "\x01\0\x07\0\xff\xff\xff\xff"
			    "\x04\0\x05\0\xff\xff\xff\xff"
			    "\x20\0\x05\0\xff\xff\xff\xff";

static void test_entry_types(void **state)
{
	char *b4096 = repeat('a', 4096), *b4097 = repeat('b', 4097), *b8292 = repeat('c', 8292);
	char *l3000 = repeat('s', 3000), *l4095 = repeat('t', 4095), *bigx = repeat('x', 6000);
	struct tent layer[] = {
		{ "./", 'd', 0755, .mtime = 1500000000 },
		{ "etc/", 'd' },
		{ "etc/hello", 'f', 0640, 1000, 2000, "hello, world\n",
		  .xattrs = { { "user.note", "hi" },
			      { "security.capability", capability, sizeof(capability) },
			      { "trusted.t", "tv" } } },
		{ "etc/hard", 'h', .data = "etc/hello" },
		{ "empty", 'f', .data = "" },
		{ "suid", 'f', 04755, .data = "x",
		  .xattrs = { { "system.posix_acl_access", acl, sizeof(acl) } } },
		{ "bigids", 'f', 0600, 70000, 80000, "ids" },
		{ "b4096", 'f', .data = b4096 },
		{ "b4097", 'f', .data = b4097 },
		{ "b8292", 'f', .data = b8292 },
		{ "bigx", 'f', .data = "tail beside a 6000-byte xattr",
		  .xattrs = { { "user.big", bigx } } },
		{ "dx", 'd', 0700, 1, 2, .mtime = 1234567890, .xattrs = { { "user.dir", "d" } } },
		{ "rel", 'l', .data = "etc/hello" },
		{ "abs", 'l', .data = "/etc/hello" },
		{ "long3000", 'l', .data = l3000 },
		{ "long4095", 'l', .data = l4095 },
		{ "dev/", 'd' },
		{ "dev/null", 'c', 0666, .major = 1, .minor = 3 },
		{ "dev/big", 'c', .major = 259, .minor = 70000 },
		{ "dev/sda", 'b', 0660, 0, 6, .major = 8, .minor = 0 },
		{ "run/", 'd' },
		{ "run/fifo", 'p', 0600 },
		{ "sysx", 'f', .data = "s", .xattrs = { { "system.unknown", "dropped" } } },
	};
	struct tent want[ARRAY_SIZE(layer) - 1];
	const char *layers[] = { at(state, "l1.tar") };
	unsigned long dropped = 0;
	char *msg = NULL;

	tw_layer(layers[0], NULL, layer, ARRAY_SIZE(layer));
	if (build_image(at(state, "img"), layers, 1, &msg, &dropped) < 0)
		fail_msg("%s", msg);
	assert_int_equal(dropped, 1);
	memcpy(want, layer + 1, sizeof(want));
	want[2] = layer[2]; /* etc/hard is etc/hello */
	want[2].path = "etc/hard";
	want[2].same_as = "etc/hello";
	memset(want[ARRAY_SIZE(want) - 1].xattrs, 0, sizeof(want[0].xattrs)); /* dropped */
	finish(check_image(at(state, "img"), at(state, "x"), want, ARRAY_SIZE(want),
			   ARRAY_SIZE(want)));
	free(b4096), free(b4097), free(b8292), free(l3000), free(l4095), free(bigx);
}

static void test_whiteouts_and_replacement(void **state)
{
	static const struct tent l1[] = {
		{ "a/", 'd' },
		{ "a/f", 'f', .data = "1" },
		{ "a/g", 'f', .data = "1" },
		{ "b", 'f', .data = "1" },
		{ "c/", 'd' },
		{ "c/x", 'f', .data = "1" },
		{ "c/sub/", 'd' },
		{ "c/sub/y", 'f', .data = "1" },
		{ "r/", 'd' },
		{ "r/child", 'f', .data = "1" },
		{ "q", 'f', .data = "1" },
		{ "m/", 'd', 0700 },
		{ "m/k", 'f', .data = "1" },
		{ "keep", 'f', .data = "1" },
		{ "s0", 'f', .data = "1" },
		{ "p/", 'd' },
		{ "p/old", 'f', .data = "1" },
		{ "target", 'f', .data = "T" },
	};
	static const struct tent l2[] = {
		{ "a/.wh.f", 'f' },
		{ ".wh.b", 'f' },
		{ "c/", 'd' },
		{ "c/.wh..wh..opq", 'f' },
		{ "c/new", 'f', .data = "2" },
		{ "r", 'f', .data = "2" }, /* a file replaces a directory */
		{ "q/", 'd', 0750 },	   /* a directory replaces a file */
		{ "q/z", 'f', .data = "2" },
		{ "m/", 'd', 0750, 5, 6 }, /* metadata changes, children stay */
		{ ".wh.nothere", 'f' },	   /* hides nothing */
		{ ".wh..wh.plnk", 'f' },   /* aufs bookkeeping: ignored */
		{ "s", 'f', .data = "2" },
		{ ".wh.s", 'f' }, /* only hides earlier layers */
		{ "p/new", 'f', .data = "2" },
		{ "p/.wh..wh..opq", 'f' },	 /* after a sibling: still keeps it */
		{ "hl", 'h', .data = "target" }, /* hardlink to an earlier layer */
		{ "h2", 'h', .data = "keep" },
	};
	static const struct tent l3[] = {
		{ "target", 'f', .data = "U" }, /* hl keeps the old inode */
	};
	static const struct tent want[] = {
		{ "a", 'd' },
		{ "a/g", 'f', .data = "1" },
		{ "c", 'd' },
		{ "c/new", 'f', .data = "2" },
		{ "r", 'f', .data = "2" },
		{ "q", 'd', 0750 },
		{ "q/z", 'f', .data = "2" },
		{ "m", 'd', 0750, 5, 6 },
		{ "m/k", 'f', .data = "1" },
		{ "keep", 'f', .data = "1" },
		{ "s0", 'f', .data = "1" },
		{ "s", 'f', .data = "2" },
		{ "p", 'd' },
		{ "p/new", 'f', .data = "2" },
		{ "hl", 'f', .data = "T" },
		{ "target", 'f', .data = "U" },
		{ "h2", 'f', .data = "1", .same_as = "keep" },
	};
	const char *layers[] = { at(state, "l1.tar"), at(state, "l2.tar"), at(state, "l3.tar") };
	char *msg = NULL;

	tw_layer(layers[0], NULL, l1, ARRAY_SIZE(l1));
	tw_layer(layers[1], NULL, l2, ARRAY_SIZE(l2));
	tw_layer(layers[2], NULL, l3, ARRAY_SIZE(l3));
	if (build_image(at(state, "img"), layers, 3, &msg, NULL) < 0)
		fail_msg("%s", msg);
	finish(check_image(at(state, "img"), at(state, "x"), want, ARRAY_SIZE(want),
			   ARRAY_SIZE(want)));
}

/* A replaced file's blocks stay behind as dead (punched) blocks; the image
 * only references the new data. */
static void test_replaced_data_is_dead(void **state)
{
	char *old = repeat('o', 3 * 4096 + 100), *new = repeat('n', 2 * 4096 + 7);
	const struct tent l1[] = { { "f", 'f', .data = old }, { "g", 'f', .data = old } };
	const struct tent l2[] = { { "f", 'f', .data = new }, { ".wh.g", 'f' } };
	const struct tent want[] = { { "f", 'f', .data = new } };
	const char *layers[] = { at(state, "l1.tar"), at(state, "l2.tar") };
	char *msg = NULL;

	tw_layer(layers[0], "gzip", l1, ARRAY_SIZE(l1));
	tw_layer(layers[1], NULL, l2, ARRAY_SIZE(l2));
	if (build_image(at(state, "img"), layers, 2, &msg, NULL) < 0)
		fail_msg("%s", msg);
	finish(check_image(at(state, "img"), at(state, "x"), want, 1, 1));
	free(old), free(new);
}

/* The tree API directly: data in any order, holes read back as zeros, and
 * no byte past the declared size. */
static void test_sparse_writes(void **state)
{
	static const struct erofs_attr reg = { .mode = S_IFREG | 0644, .mtime = 1600000000 };
	const uint64_t size = 3 * MiB + 123;
	gantry_error_t err = NULL;
	struct erofs_tree *t;
	struct erofs_inode *ino;
	struct rd_inode ri;
	uint8_t *buf = xzalloc(size), *back = xmalloc(size);
	int fd = open(at(state, "img"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct rd r;

	memset(buf + MiB + 5, 0xab, 70000);
	memset(buf + size - 50, 0xcd, 50); /* into the inline tail */
	assert_int_equal(erofs_tree_new(fd, &t, &err), 0);
	assert_int_equal(erofs_tree_add(t, "sparse", &reg, NULL, &ino, &err), 0);
	assert_int_equal(erofs_inode_reserve(t, ino, size, &err), 0);
	assert_int_equal(erofs_inode_pwrite(t, ino, buf + size - 50, 50, size - 50, &err), 0);
	assert_int_equal(erofs_inode_pwrite(t, ino, buf + MiB + 5, 70000, MiB + 5, &err), 0);
	assert_int_equal(erofs_inode_pwrite(t, ino, buf, 2, size - 1, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "beyond the file's size"));
	gantry_error_free(&err);
	assert_int_equal(erofs_write(t, &err), 0);
	erofs_tree_free(t);
	close(fd);

	assert_int_equal(rd_open(&r, at(state, "img")), 0);
	assert_int_equal(rd_lookup(&r, "sparse", &ri), 0);
	assert_int_equal(ri.size, size);
	assert_int_equal(rd_read(&r, &ri, 0, back, size), 0);
	assert_memory_equal(back, buf, size);
	rd_close(&r);
	free(buf), free(back);
	if (have_fsck()) {
		const char *argv[] = { "fsck.erofs", at(state, "img"), NULL };

		assert_int_equal(run(argv), 0);
	}
}

/* Build from layers expected to fail; check the one-line message and that
 * nothing but the layers is left in the test directory. */
static void expect_reject(void **state, const char *const *layers, size_t n, const char *expect)
{
	char *msg = NULL, *before = listing(state), *after;

	assert_int_equal(build_image(at(state, "img"), layers, n, &msg, NULL), -1);
	print_message("rejected: %s\n", msg);
	if (strstr(msg, expect) == NULL)
		fail_msg("message `%s` lacks `%s`", msg, expect);
	assert_null(strchr(msg, '\n'));
	after = listing(state);
	assert_string_equal(before, after);
	free(msg), free(before), free(after);
}

static void test_hardlink_to_whiteout(void **state)
{
	static const struct tent l1[] = { { "f", 'f', .data = "x" } };
	static const struct tent l2[] = { { ".wh.f", 'f' } };
	static const struct tent l3[] = { { "h", 'h', .data = "f" } };
	const char *layers[] = { at(state, "l1.tar"), at(state, "l2.tar"), at(state, "l3.tar") };

	tw_layer(layers[0], NULL, l1, 1);
	tw_layer(layers[1], NULL, l2, 1);
	tw_layer(layers[2], NULL, l3, 1);
	expect_reject(state, layers, 3, "entry `h`: hardlink target `f` is not in the image");
}

static void test_long_names(void **state)
{
	char *d = repeat('d', 255), *n = repeat('n', 255), *l = repeat('l', 255);
	char *f, *s;
	const char *layers[] = { at(state, "l1.tar") };
	char *msg = NULL;

	xasprintf(&f, "%s/%s", d, n);
	xasprintf(&s, "%s/%s", d, l);
	{
		const struct tent v[] = { { d, 'd' },
					  { f, 'f', .data = "long" },
					  { s, 'l', .data = n } };

		tw_layer(layers[0], NULL, v, ARRAY_SIZE(v));
		if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
			fail_msg("%s", msg);
		finish(check_image(at(state, "img"), at(state, "x"), v, ARRAY_SIZE(v),
				   ARRAY_SIZE(v)));
	}
	free(d), free(n), free(l), free(f), free(s);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void test_large_file_streams(void **state)
{
	static const struct tent after = { "after", 'f', .data = "after" };
	struct archive *a = tw_open(at(state, "l1.tar"), NULL);
	struct archive_entry *e = archive_entry_new();
	const char *layers[] = { at(state, "l1.tar") };
	uint64_t *chunk = xmalloc(MiB), seed = 42, h = HASH_INIT;
	struct rusage before, done;
	struct rd_inode ino;
	char *msg = NULL;
	struct rd r;

	archive_entry_set_pathname(e, "big");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)BIG_FILE_SIZE);
	archive_entry_set_mtime(e, 1600000000, 0);
	assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
	for (uint64_t off = 0; off < BIG_FILE_SIZE; off += MiB) {
		for (size_t i = 0; i < MiB / 8; i++)
			chunk[i] = xorshift(&seed);
		h = hash_bytes(h, chunk, MiB);
		assert_int_equal(archive_write_data(a, chunk, MiB), (la_ssize_t)MiB);
	}
	archive_entry_free(e);
	tw_add(a, &after);
	tw_close(a);

	getrusage(RUSAGE_SELF, &before);
	if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	getrusage(RUSAGE_SELF, &done);
	/* streaming: the peak must not grow by anything near the file's size */
	assert_true((uint64_t)(done.ru_maxrss - before.ru_maxrss) * KiB < 32 * MiB);

	assert_int_equal(rd_open(&r, at(state, "img")), 0);
	assert_int_equal(rd_lookup(&r, "big", &ino), 0);
	assert_int_equal(ino.size, BIG_FILE_SIZE);
	{
		uint64_t rh = HASH_INIT;

		for (uint64_t off = 0; off < BIG_FILE_SIZE; off += MiB) {
			assert_int_equal(rd_read(&r, &ino, off, chunk, MiB), 0);
			rh = hash_bytes(rh, chunk, MiB);
		}
		assert_true(rh == h);
	}
	rd_close(&r);
	free(chunk);
	if (!check_image(at(state, "img"), at(state, "x"), &after, 1, 2))
		skip_because("only the independent reader checked the image (why: the line above)");
	assert_true(hash_file(at(state, "x/big")) == h);
}

static void test_big_directory(void **state)
{
	struct archive *a = tw_open(at(state, "l1.tar"), "zstd");
	const char *layers[] = { at(state, "l1.tar") };
	struct tent want[BIG_DIR_N / 997 + 3];
	char names[ARRAY_SIZE(want)][32], data[ARRAY_SIZE(want)][8];
	size_t nw = 0;
	struct rd_inode ino;
	char *msg = NULL;
	struct rd r;

	tw_add(a, &(struct tent){ "big/", 'd' });
	want[nw++] = (struct tent){ "big", 'd' };
	for (int i = 0; i < BIG_DIR_N; i++) {
		char name[32], content[8];

		snprintf(name, sizeof(name), "big/entry-%05d", i);
		snprintf(content, sizeof(content), "%d", i);
		tw_add(a, &(struct tent){ name, 'f', .data = content });
		if (i % 997 == 0 || i == BIG_DIR_N - 1) {
			memcpy(names[nw], name, sizeof(name));
			memcpy(data[nw], content, sizeof(content));
			want[nw] = (struct tent){ names[nw], 'f', .data = data[nw] };
			nw++;
		}
	}
	tw_close(a);
	if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	assert_int_equal(rd_open(&r, at(state, "img")), 0);
	assert_int_equal(rd_lookup(&r, "big", &ino), 0);
	assert_true(ino.size > 40 * 4096); /* many dirent blocks */
	rd_close(&r);
	finish(check_image(at(state, "img"), at(state, "x"), want, nw, BIG_DIR_N + 1));
}

static void test_deep_tree(void **state)
{
	struct tent want[DEEP_LEVELS + 1];
	char *paths[DEEP_LEVELS + 1];
	const char *layers[] = { at(state, "l1.tar") };
	struct archive *a = tw_open(layers[0], "gzip");
	struct rd_inode ino;
	char *msg = NULL;
	struct rd r;

	paths[0] = xstrdup("l");
	for (int i = 1; i < DEEP_LEVELS; i++)
		xasprintf(&paths[i], "%s/l", paths[i - 1]);
	xasprintf(&paths[DEEP_LEVELS], "%s/bottom", paths[DEEP_LEVELS - 1]);
	for (int i = 0; i <= DEEP_LEVELS; i++) {
		want[i] = (struct tent){ paths[i], i < DEEP_LEVELS ? 'd' : 'f', .data = "deep" };
		tw_add(a, &want[i]);
	}
	/* parents that no entry names become 0755 root directories */
	tw_add(a, &(struct tent){ "x/y/z", 'f', .data = "z" });
	tw_close(a);
	if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	assert_int_equal(rd_open(&r, at(state, "img")), 0);
	assert_int_equal(rd_lookup(&r, "x/y", &ino), 0);
	assert_int_equal(ino.mode, S_IFDIR | 0755);
	assert_int_equal(ino.uid, 0);
	assert_int_equal(ino.mtime, 0);
	rd_close(&r);
	finish(check_image(at(state, "img"), at(state, "x"), want, ARRAY_SIZE(want),
			   DEEP_LEVELS + 1 + 3));
	for (int i = 0; i <= DEEP_LEVELS; i++)
		free(paths[i]);
}

static void test_gzip_and_zstd(void **state)
{
	static const struct tent l1[] = {
		{ "etc/", 'd' },
		{ "etc/os-release", 'f', .data = "ID=test\n", .xattrs = { { "user.a", "1" } } },
		{ "bin/", 'd' },
		{ "bin/sh", 'f', 0755, .data = "#!\n" },
	};
	static const struct tent l2[] = {
		{ "bin/.wh.sh", 'f' },
		{ "bin/busybox", 'f', 0755, .data = "bb" },
		{ "bin/sh", 'l', .data = "busybox" },
	};
	static const struct tent want[] = {
		{ "etc", 'd' },
		{ "etc/os-release", 'f', .data = "ID=test\n", .xattrs = { { "user.a", "1" } } },
		{ "bin", 'd' },
		{ "bin/busybox", 'f', 0755, .data = "bb" },
		{ "bin/sh", 'l', .data = "busybox" },
	};
	const char *layers[] = { at(state, "l1.tar.gz"), at(state, "l2.tar.zst") };
	char *msg = NULL;

	tw_layer(layers[0], "gzip", l1, ARRAY_SIZE(l1));
	tw_layer(layers[1], "zstd", l2, ARRAY_SIZE(l2));
	if (build_image(at(state, "img"), layers, 2, &msg, NULL) < 0)
		fail_msg("%s", msg);
	finish(check_image(at(state, "img"), at(state, "x"), want, ARRAY_SIZE(want),
			   ARRAY_SIZE(want)));
}

/* Escapes are neutralised: everything lands inside the image. */
static void test_hostile_paths_stay_inside(void **state)
{
	char escape[64], up[80], *parent, *grand;
	uint64_t passwd = hash_file("/etc/passwd");
	const char *layers[] = { at(state, "l1.tar") };
	char *msg = NULL;
	struct ctx *c = *state;

	snprintf(escape, sizeof(escape), "escape-%d", (int)getpid());
	snprintf(up, sizeof(up), "../../../%s", escape);
	{
		const struct tent l1[] = {
			{ up, 'f', .data = "e" },
			{ "/abs/", 'd' },
			{ "/abs/file", 'f', .data = "a" },
			{ "a/../../b", 'f', .data = "b" },
			{ "etc/", 'd' },
			{ "evil", 'l', .data = "/etc" },
			{ "evil/passwd", 'f', .data = "root:x:0:0::/:/bin/sh\n" },
			{ "up", 'l', .data = "../../.." },
			{ "up/x", 'f', .data = "x" },
			{ "dotdot", 'l', .data = "etc/../../../" },
			{ "dotdot/y", 'f', .data = "y" },
			{ "hl", 'h', .data = "../../etc/passwd" },
		};
		const struct tent want[] = {
			{ escape, 'f', .data = "e" },
			{ "abs", 'd' },
			{ "abs/file", 'f', .data = "a" },
			{ "b", 'f', .data = "b" },
			{ "etc", 'd' },
			{ "evil", 'l', .data = "/etc" },
			{ "etc/passwd", 'f', .data = "root:x:0:0::/:/bin/sh\n" },
			{ "up", 'l', .data = "../../.." },
			{ "x", 'f', .data = "x" },
			{ "dotdot", 'l', .data = "etc/../../../" },
			{ "y", 'f', .data = "y" },
			{ "hl", 'f', .data = "root:x:0:0::/:/bin/sh\n", .same_as = "etc/passwd" },
		};

		tw_layer(layers[0], NULL, l1, ARRAY_SIZE(l1));
		if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
			fail_msg("%s", msg);
		{
			char *list = listing(state);

			assert_string_equal(list, "img,l1.tar,");
			free(list);
		}
		xasprintf(&parent, "%s/../%s", c->dir, escape);
		xasprintf(&grand, "%s/../../%s", c->dir, escape);
		assert_int_equal(access(parent, F_OK), -1);
		assert_int_equal(access(grand, F_OK), -1);
		assert_true(hash_file("/etc/passwd") == passwd);
		free(parent), free(grand);
		finish(check_image(at(state, "img"), at(state, "x"), want, ARRAY_SIZE(want),
				   ARRAY_SIZE(want)));
	}
}

static void test_hostile_entries_rejected(void **state)
{
	char *n256 = repeat('n', 256), *t4096 = repeat('t', 4096), *deep = repeat('a', 4099);
	const struct {
		struct tent v[3];
		const char *expect;
	} cases[] = {
		{ { { "h", 'h', .data = "../../etc/passwd" } },
		  "entry `h`: hardlink target `../../etc/passwd` is not in the image" },
		{ { { "s", 'l', .data = "/etc" }, { "h", 'h', .data = "s/passwd" } },
		  "hardlink target `s/passwd` is not in the image" },
		{ { { n256, 'f', .data = "" } }, "name longer than 255 bytes" },
		{ { { "l1", 'l', .data = "l2" }, { "l2", 'l', .data = "l1" }, { "l1/x", 'f' } },
		  "entry `l1/x`: too many levels of symbolic links" },
		{ { { "f", 'f', .data = "x" }, { "f/x", 'f' } },
		  "entry `f/x`: `f` is not a directory" },
		{ { { ".", 'f', .data = "x" } }, "entry `.`: cannot replace the image root" },
		{ { { "d/", 'd' }, { "h", 'h', .data = "d" } },
		  "hardlink target `d` is a directory" },
		{ { { "d/.wh.", 'f' } }, "invalid whiteout name" },
		{ { { "e", 'l', .data = "" } }, "empty symlink target" },
		{ { { "u", 'f', 0644, 1LL << 33 } }, "uid 8589934592 or gid 0 out of range" },
		{ { { "t", 'l', .data = t4096 } }, "symlink target longer than 4095 bytes" },
		/* Each component a directory: host memory by the byte. */
		{ { { deep, 'f', .data = "" } }, "path longer than 4096 bytes" },
	};

	for (size_t i = 1; i < 4099; i += 2)
		deep[i] = '/'; /* a/a/a/...: 2,050 directories */
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		const char *layers[] = { at(state, "bad.tar") };
		size_t n = 0;

		while (n < 3 && cases[i].v[n].path)
			n++;
		tw_layer(layers[0], NULL, cases[i].v, n);
		expect_reject(state, layers, 1, cases[i].expect);
		unlink(layers[0]);
	}
	free(n256), free(t4096), free(deep);
}

static void truncate_half(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void test_bad_streams_rejected(void **state)
{
	char *data = repeat('q', 300000);
	const struct tent v[] = { { "f", 'f', .data = data }, { "g", 'f', .data = "g" } };
	const char *gz[] = { at(state, "l.tar.gz") }, *tar[] = { at(state, "l.tar") };
	const char *junk[] = { at(state, "junk") }, *ustar[] = { at(state, "u.tar") };
	int fd;

	/* truncated gzip */
	tw_layer(gz[0], "gzip", v, 2);
	truncate_half(gz[0]);
	expect_reject(state, gz, 1, "gzip");
	/* tar cut in the middle of a file's data */
	tw_layer(tar[0], NULL, v, 2);
	truncate_half(tar[0]);
	expect_reject(state, tar, 1, "runcated");
	/* not an archive */
	fd = open(junk[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(write_full(fd, data, 5000), 0);
	close(fd);
	expect_reject(state, junk, 1, "Unrecognized archive format");
	/* ustar header that claims fewer bytes than follow: the rest is garbage */
	{
		struct archive *a = archive_write_new();
		char hdr[512];
		unsigned int sum = 0;

		archive_write_set_format_ustar(a);
		assert_int_equal(archive_write_open_filename(a, ustar[0]), ARCHIVE_OK);
		for (size_t i = 0; i < 2; i++)
			tw_add(a, &v[i]);
		tw_close(a);
		fd = open(ustar[0], O_RDWR);
		assert_int_equal(pread(fd, hdr, 512, 0), 512);
		memcpy(hdr + 124, "00000001000", 12); /* 512 instead of 300000 */
		memset(hdr + 148, ' ', 8);
		for (size_t i = 0; i < 512; i++)
			sum += (unsigned char)hdr[i];
		snprintf(hdr + 148, 8, "%06o", sum);
		assert_int_equal(pwrite(fd, hdr, 512, 0), 512);
		close(fd);
		expect_reject(state, ustar, 1, "read layer: Damaged tar archive");
	}
	free(data);
}

static void test_empty_layer(void **state)
{
	const char *layers[] = { at(state, "empty.tar") };
	char *msg = NULL;
	int fd = open(layers[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);

	close(fd);
	if (build_image(at(state, "img"), layers, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	finish(check_image(at(state, "img"), at(state, "x"), NULL, 0, 0));
}

/* Same layers, same bytes: nothing depends on hash seeds or timing. */
static void test_reproducible(void **state)
{
	static const struct tent l1[] = {
		{ "b/", 'd' },
		{ "b/z", 'f', .data = "z" },
		{ "b/a", 'f', .data = "a" },
		{ "a", 'l', .data = "b/z" },
		{ "c", 'h', .data = "b/a" },
		{ "d/e/f", 'f' },
	};
	const char *layers[] = { at(state, "l1.tar") };
	const char *cmp[] = { "cmp", at(state, "img1"), at(state, "img2"), NULL };
	char *msg = NULL;

	tw_layer(layers[0], NULL, l1, ARRAY_SIZE(l1));
	if (build_image(cmp[1], layers, 1, &msg, NULL) < 0 ||
	    build_image(cmp[2], layers, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	assert_int_equal(run(cmp), 0);
}

/* A failed rebuild leaves the published image alone; no temp files remain. */
static void test_publish_is_atomic(void **state)
{
	static const struct tent good[] = { { "ok", 'f', .data = "good" } };
	static const struct tent bad[] = { { "h", 'h', .data = "missing" } };
	const char *l1[] = { at(state, "good.tar") }, *l2[] = { at(state, "bad.tar") };
	char *msg = NULL, *list;
	struct stat st;

	tw_layer(l1[0], NULL, good, 1);
	tw_layer(l2[0], NULL, bad, 1);
	if (build_image(at(state, "img"), l1, 1, &msg, NULL) < 0)
		fail_msg("%s", msg);
	assert_int_equal(stat(at(state, "img"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(build_image(at(state, "img"), l2, 1, &msg, NULL), -1);
	free(msg);
	list = listing(state);
	assert_string_equal(list, "bad.tar,good.tar,img,");
	free(list);
	finish(check_image(at(state, "img"), at(state, "x"), good, 1, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_entry_types, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whiteouts_and_replacement, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replaced_data_is_dead, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sparse_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hardlink_to_whiteout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_file_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_big_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deep_tree, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gzip_and_zstd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_paths_stay_inside, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_entries_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_streams_rejected, setup, teardown),
		cmocka_unit_test_setup_teardown(test_empty_layer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reproducible, setup, teardown),
		cmocka_unit_test_setup_teardown(test_publish_is_atomic, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
