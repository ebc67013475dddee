/* The escape suite's host races, cases 41-48 of the design note's table
 * (docs/shares.md): a host thread swaps names in a loop, or moves a
 * directory out of the share and back, while the test sends a hostile
 * guest's requests to the share server over a temp tree for RACE_MS. Each
 * checks that no reply ever held the canary's secret, that nothing new
 * appeared beside the shares, and that the canary directory is
 * unchanged. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>

#include <cmocka.h>

/* The share server's test client; not every helper of it is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "share_client.h"
#pragma GCC diagnostic pop
#include "share_escape_rig.h"

#define RACE_MS 300

/* Does the READDIR(PLUS) reply in c->rep name something of the canary? */
static bool lists_canary(const struct cl *c, bool plus)
{
	static const char *const names[] = { "secret", "sub", "link" };
	size_t off = 0;

	while (off < c->rep_len) {
		const struct fuse_dirent *d =
			plus ? &((const struct fuse_direntplus *)(c->rep + off))->dirent
			     : (const struct fuse_dirent *)(c->rep + off);

		for (size_t i = 0; i < ARRAY_SIZE(names); i++)
			if (d->namelen == strlen(names[i]) &&
			    !memcmp(d->name, names[i], d->namelen))
				return true;
		off += plus ? FUSE_DIRENTPLUS_SIZE((const struct fuse_direntplus *)(c->rep + off))
			    : FUSE_DIRENT_SIZE(d);
	}
	return false;
}

/* Every file beneath rel: no setuid bit, and setgid on directories only. */
static int setid_walk(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p, (void)flag, (void)f;
	if (st->st_mode & S_ISUID)
		return 1;
	if (!S_ISDIR(st->st_mode) && (st->st_mode & S_ISGID))
		return 1;
	return 0;
}

static void no_setid(struct cl *c, const char *rel)
{
	assert_int_equal(nftw(cl_path(c, rel), setid_walk, 16, FTW_PHYS), 0);
}

struct race {
	struct cl *c;
	char a[512], b[512], tmp[512]; /* host paths the thread works on */
	void (*host)(struct race *r, unsigned long i);
	atomic_bool stop;
	pthread_t thread;
	atomic_ulong swaps;
	unsigned long rounds;
	char *beside; /* the names beside the shares, before */
	int bad_line; /* the first failed expectation on the guest side */
	long bad_val;
	struct timespec start;
};

/* Record the first failed expectation; asserted once the thread is gone. */
#define EXPECT(r, cond, val)                                                                       \
	do {                                                                                       \
		if (!(cond) && !(r)->bad_line) {                                                   \
			(r)->bad_line = __LINE__;                                                  \
			(r)->bad_val = (long)(val);                                                \
		}                                                                                  \
	} while (0)

static void *race_thread(void *p)
{
	struct race *r = p;

	while (!atomic_load(&r->stop))
		r->host(r, atomic_fetch_add(&r->swaps, 1));
	return NULL;
}

static void race_start(struct race *r, struct cl *c, const char *a, const char *b,
		       void (*host)(struct race *, unsigned long))
{
	memset(r, 0, sizeof(*r));
	r->c = c;
	snprintf(r->a, sizeof(r->a), "%s/%s", c->root, a);
	snprintf(r->b, sizeof(r->b), "%s/%s", c->root, b);
	snprintf(r->tmp, sizeof(r->tmp), "%s/%s.tmp", c->root, a);
	r->host = host;
	r->beside = names_in(c->root);
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	assert_int_equal(pthread_create(&r->thread, NULL, race_thread, r), 0);
}

/* Another round of guest requests? For RACE_MS, and on till the host
 * thread has swapped twice (a slow machine may start it late), within
 * 20 s. */
static bool race_on(struct race *r)
{
	struct timespec now;
	long ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	r->rounds++;
	ms = (now.tv_sec - r->start.tv_sec) * 1000 + (now.tv_nsec - r->start.tv_nsec) / 1000000;
	return ms < RACE_MS || (atomic_load(&r->swaps) < 2 && ms < 20000);
}

static void race_stop(struct race *r)
{
	cleanup_free char *beside = r->beside, *now = NULL;

	atomic_store(&r->stop, true);
	pthread_join(r->thread, NULL);
	if (r->bad_line)
		fail_msg("race: expectation at line %d failed (%ld) after %lu rounds, %lu swaps",
			 r->bad_line, r->bad_val, r->rounds, atomic_load(&r->swaps));
	assert_true(atomic_load(&r->swaps) > 0 && r->rounds > 1);
	print_message("race: %lu guest rounds, %lu host swaps\n", r->rounds,
		      atomic_load(&r->swaps));
	/* nothing new beside the shares */
	now = names_in(r->c->root);
	assert_string_equal(beside, now);
}

/* a and b swap names, atomically on even rounds; on odd ones a is moved
 * aside, b's kind planted at a's name, then put back: the guest also sees
 * a missing and a half-done state. */
static void swap_names(struct race *r, unsigned long i)
{
	char target[512];
	ssize_t n;

	if (i % 2 == 0) {
		renameat2(AT_FDCWD, r->a, AT_FDCWD, r->b, RENAME_EXCHANGE);
		return;
	}
	n = readlink(r->b, target, sizeof(target) - 1);
	if (n <= 0) /* a and b are swapped now: swap back first */
		renameat2(AT_FDCWD, r->a, AT_FDCWD, r->b, RENAME_EXCHANGE);
	n = readlink(r->b, target, sizeof(target) - 1);
	if (n <= 0 || rename(r->a, r->tmp) < 0)
		return;
	target[n] = 0;
	if (symlink(target, r->a) == 0)
		unlink(r->a);
	rename(r->tmp, r->a);
}

/* a is moved to b (outside the share) and back. */
static void move_out_and_back(struct race *r, unsigned long i)
{
	(void)i;
	if (rename(r->a, r->b) == 0)
		rename(r->b, r->a);
}

/* A symlink out of the share is planted at a, then removed. */
static void plant_link(struct race *r, unsigned long i)
{
	if (symlink(i % 2 ? "../canary" : "../canary/new", r->a) == 0)
		unlink(r->a);
}

/* 41: the host swaps a directory for a symlink to the canary directory in
 * a loop while the guest looks it up and opens, reads and lists what is
 * beneath: children resolve under the pinned directory or ENOTDIR under
 * the link; the canary's names and secret are never seen. */
static void test_case41_race_dir_lookup(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		const char *name = r.rounds % 2 ? "d" : "dl";
		int64_t d = cl_lookup(c, c->rw, name), x, fh;

		EXPECT(&r, !leaked(c), d);
		if (d < 0)
			continue;
		x = cl_lookup(c, (uint64_t)d, "secret");
		EXPECT(&r, x == -ENOENT || x == -ENOTDIR, x);
		x = cl_lookup(c, (uint64_t)d, "x");
		EXPECT(&r, x > 1 || x == -ENOTDIR, x);
		if (x > 1 && (fh = cl_open(c, FUSE_OPEN, (uint64_t)x, O_RDONLY)) > 0) {
			int n = cl_read(c, (uint64_t)x, (uint64_t)fh, 0, 64);

			EXPECT(&r, n == 1 && c->rep[0] == 'x', n);
			cl_release(c, FUSE_RELEASE, (uint64_t)x, (uint64_t)fh);
		}
		fh = cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);
		EXPECT(&r, fh > 0 || fh == -ENOTDIR, fh);
		if (fh > 0) {
			int ret = readdir_call(c, FUSE_READDIRPLUS, (uint64_t)d, (uint64_t)fh, 0);

			EXPECT(&r, ret == 0 && !lists_canary(c, true) && !leaked(c), ret);
			cl_release(c, FUSE_RELEASEDIR, (uint64_t)d, (uint64_t)fh);
		}
		x = cl_lookup(c, (uint64_t)d, "sub");
		EXPECT(&r, x == -ENOENT || x == -ENOTDIR, x);
	}
	race_stop(&r);
	canary_same(f);
}

/* 42: the host swaps a file for a symlink to the canary's secret between
 * the guest's LOOKUP and OPEN, in a loop, while the guest opens, reads,
 * writes, truncates and CREATEs (no O_EXCL) the name: it gets the share's
 * file or ELOOP (CREATE also ENOENT, when the name went between its
 * exclusive create and its lookup), never a byte of the secret, and the
 * canary is unchanged. */
static void test_case42_race_file_open(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		const char *name = r.rounds % 2 ? "f" : "fl";
		int64_t n = cl_lookup(c, c->rw, name), fh;
		uint64_t cfh;

		EXPECT(&r, !leaked(c), n);
		if (n > 0) {
			fh = cl_open(c, FUSE_OPEN, (uint64_t)n, O_RDWR);
			EXPECT(&r, fh > 0 || fh == -ELOOP, fh);
			if (fh > 0) {
				struct fuse_setattr_in sa = { .valid = FATTR_SIZE | FATTR_FH,
							      .fh = (uint64_t)fh,
							      .size = 5 };
				int k = cl_read(c, (uint64_t)n, (uint64_t)fh, 0, 64);

				/* 0: a file CREATE made while the name was gone */
				EXPECT(&r, (k == 5 || k == 0) && !leaked(c), k);
				k = cl_write(c, (uint64_t)n, (uint64_t)fh, 0, "hello");
				EXPECT(&r, k == 0, k);
				k = cl_setattr(c, (uint64_t)n, &sa);
				EXPECT(&r, k == 0, k);
				cl_release(c, FUSE_RELEASE, (uint64_t)n, (uint64_t)fh);
			}
		}
		n = cl_create(c, c->rw, name, O_RDWR | O_CREAT, 0644, &cfh);
		EXPECT(&r, n > 1 || n == -ELOOP || n == -ENOENT, n);
		if (n > 1) {
			int k = cl_read(c, (uint64_t)n, cfh, 0, 64);

			EXPECT(&r, k >= 0 && !leaked(c), k);
			cl_release(c, FUSE_RELEASE, (uint64_t)n, cfh);
		}
	}
	race_stop(&r);
	canary_same(f);
}

/* 43: READDIR and READDIRPLUS of the share's root and of a directory the
 * host keeps swapping for a symlink to the canary: listings hold the
 * share's names only; READDIRPLUS's attributes are the share's inodes. */
static void test_case43_race_readdir(void **state)
{
	FX();
	struct race r;
	int64_t d = cl_lookup(c, c->rw, "d");
	int64_t dfh = cl_open(c, FUSE_OPENDIR, (uint64_t)d, O_RDONLY);

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		uint32_t op = r.rounds % 2 ? FUSE_READDIRPLUS : FUSE_READDIR;
		int64_t fh = cl_open(c, FUSE_OPENDIR, c->rw, O_RDONLY), n;
		int ret;

		EXPECT(&r, fh > 0, fh);
		ret = readdir_call(c, op, c->rw, (uint64_t)fh, 0);
		EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS) && !leaked(c), ret);
		cl_release(c, FUSE_RELEASEDIR, c->rw, (uint64_t)fh);
		ret = readdir_call(c, op, (uint64_t)d, (uint64_t)dfh, 0);
		EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS) && !leaked(c), ret);
		n = cl_lookup(c, c->rw, "dl");
		if (n > 0 && (fh = cl_open(c, FUSE_OPENDIR, (uint64_t)n, O_RDONLY)) > 0) {
			ret = readdir_call(c, op, (uint64_t)n, (uint64_t)fh, 0);
			EXPECT(&r, ret == 0 && !lists_canary(c, op == FUSE_READDIRPLUS), ret);
			cl_release(c, FUSE_RELEASEDIR, (uint64_t)n, (uint64_t)fh);
		}
	}
	race_stop(&r);
	canary_same(f);
}

/* 44: RENAMEs into, out of and within a directory the host keeps swapping
 * for a symlink to the canary: they act in the share or fail (ENOTDIR on
 * the link's node); nothing moves into or out of the canary. */
static void test_case44_race_rename(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary", cl_path(c, "share/dl")), 0);
	race_start(&r, c, "share/d", "share/dl", swap_names);
	while (race_on(&r)) {
		int64_t d = cl_lookup(c, c->rw, r.rounds % 2 ? "d" : "dl");
		struct fuse_rename_in in = { .newdir = (uint64_t)d }, out = { .newdir = c->rw };
		struct fuse_rename2_in noreplace = { .newdir = c->rw, .flags = RENAME_NOREPLACE };
		int ret;

		if (d < 0)
			continue;
		ret = CALL(c, FUSE_RENAME, c->rw, ARG(in), STR("f"), STR("f2"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
		ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(out), STR("f2"), STR("f"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
		ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(out), STR("secret"), STR("stolen"));
		EXPECT(&r, ret == -ENOENT || ret == -ENOTDIR, ret);
		ret = CALL(c, FUSE_RENAME2, (uint64_t)d, ARG(noreplace), STR("x"), STR("x2"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT || ret == -EEXIST, ret);
		ret = CALL(c, FUSE_RENAME, c->rw, ARG(in), STR("x2"), STR("x"));
		EXPECT(&r, ret == 0 || ret == -ENOTDIR || ret == -ENOENT, ret);
	}
	race_stop(&r);
	canary_same(f);
	assert_null(cl_get(c, "share/stolen"));
}

/* 45: LINKs of a file node while the host swaps the file for a symlink to
 * the canary's secret: the new name is the pinned inode or the symlink
 * itself, never the secret's inode, whose link count stays 1. */
static void test_case45_race_link(void **state)
{
	FX();
	struct race r;
	struct stat secret, st;

	assert_int_equal(stat(cl_path(c, "canary/secret"), &secret), 0);
	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		char name[32], host[600];
		int64_t n = cl_lookup(c, c->rw, r.rounds % 2 ? "f" : "fl");
		struct fuse_link_in ln = { .oldnodeid = (uint64_t)n };
		int ret;

		if (n < 0)
			continue;
		snprintf(name, sizeof(name), "h%lu", r.rounds);
		ret = CALL(c, FUSE_LINK, c->rw, ARG(ln), STR(name));
		EXPECT(&r, ret == 0 || ret == -ENOENT, ret);
		if (ret < 0)
			continue;
		snprintf(host, sizeof(host), "%s/share/%s", c->root, name);
		EXPECT(&r, lstat(host, &st) == 0 && st.st_ino != secret.st_ino, st.st_ino);
		ret = CALL(c, FUSE_UNLINK, c->rw, STR(name));
		EXPECT(&r, ret == 0, ret);
	}
	race_stop(&r);
	assert_int_equal(stat(cl_path(c, "canary/secret"), &st), 0);
	assert_int_equal(st.st_nlink, 1);
	canary_same(f);
}

/* 46: the host moves a directory out of the share and back in a loop
 * while the guest reads, creates, makes directories and renames in it:
 * while it is out the guest keeps that one subtree (the documented limit),
 * never its new siblings; once it is back, nothing the guest did is left
 * outside, and the canary is unchanged. */
static void test_case46_race_moved_out(void **state)
{
	FX();
	struct race r;

	assert_int_equal(mkdir(cl_path(c, "outside"), 0755), 0);
	cl_put(c, "outside/sibling", SECRET);
	race_start(&r, c, "share/d", "outside/d", move_out_and_back);
	while (race_on(&r)) {
		int64_t d = cl_lookup(c, c->rw, "d"), x;
		struct fuse_mkdir_in mk = { .mode = 0755 };
		struct fuse_rename_in back = { .newdir = c->rw };
		uint64_t fh;
		int ret;

		if (d < 0)
			continue;
		x = cl_lookup(c, (uint64_t)d, "sibling");
		EXPECT(&r, x == -ENOENT && !leaked(c), x);
		x = cl_lookup(c, (uint64_t)d, "..");
		EXPECT(&r, x == -EINVAL, x);
		x = cl_create(c, (uint64_t)d, "new", O_RDWR | O_CREAT | O_EXCL, 0644, &fh);
		EXPECT(&r, x > 1, x);
		if (x > 1) {
			cl_release(c, FUSE_RELEASE, (uint64_t)x, fh);
			ret = CALL(c, FUSE_RENAME, (uint64_t)d, ARG(back), STR("new"), STR("new"));
			EXPECT(&r, ret == 0, ret);
			ret = CALL(c, FUSE_UNLINK, c->rw, STR("new"));
			EXPECT(&r, ret == 0, ret);
		}
		ret = CALL(c, FUSE_MKDIR, (uint64_t)d, ARG(mk), STR("m"));
		EXPECT(&r, ret == 0, ret);
		ret = CALL(c, FUSE_RMDIR, (uint64_t)d, STR("m"));
		EXPECT(&r, ret == 0, ret);
	}
	race_stop(&r);
	cleanup_free char *out = names_in(cl_path(c, "outside"));
	assert_string_equal(out, "sibling\n");
	cleanup_free char *in = names_in(cl_path(c, "share/d"));
	assert_string_equal(in, "x\n");
	canary_same(f);
}

/* 47: chmod to 06777 and CREATE with mode 06777 while the host swaps the
 * file for a symlink to the canary's secret: the secret's mode is
 * unchanged, and no file in the share has a setuid bit or a setgid one. */
static void test_case47_race_setid(void **state)
{
	FX();
	struct race r;

	assert_int_equal(symlink("../canary/secret", cl_path(c, "share/fl")), 0);
	race_start(&r, c, "share/f", "share/fl", swap_names);
	while (race_on(&r)) {
		int64_t n = cl_lookup(c, c->rw, r.rounds % 2 ? "f" : "fl"), k;
		struct fuse_setattr_in sa = { .valid = FATTR_MODE, .mode = S_IFREG | 06777 };
		uint64_t fh;
		int ret;

		if (n > 0) {
			ret = cl_setattr(c, (uint64_t)n, &sa);
			EXPECT(&r, ret == 0 || ret == -EOPNOTSUPP, ret);
		}
		k = cl_create(c, c->rw, r.rounds % 2 ? "fl" : "s", O_RDWR | O_CREAT, 06777, &fh);
		EXPECT(&r, k > 1 || k == -ELOOP, k);
		if (k > 1) {
			sa.valid = FATTR_MODE | FATTR_FH;
			sa.fh = fh;
			ret = cl_setattr(c, (uint64_t)k, &sa);
			EXPECT(&r, ret == 0, ret);
			cl_release(c, FUSE_RELEASE, (uint64_t)k, fh);
		}
	}
	race_stop(&r);
	no_setid(c, "share");
	canary_same(f);
}

/* 48: symlinks out of the share planted and removed by the host where the
 * guest CREATEs (no O_EXCL), MKNODs, MKDIRs and SYMLINKs: each makes its
 * inode in the share, or fails (ELOOP, EEXIST, ENOENT); nothing appears in
 * the canary. */
static void test_case48_race_create(void **state)
{
	FX();
	struct race r;

	race_start(&r, c, "share/n", "share/unused", plant_link);
	while (race_on(&r)) {
		struct fuse_mknod_in mn = { .mode = S_IFREG | 0644 };
		struct fuse_mkdir_in mk = { .mode = 0755 };
		uint64_t fh;
		int64_t k = cl_create(c, c->rw, "n", O_RDWR | O_CREAT | O_TRUNC, 0644, &fh);
		int ret;

		EXPECT(&r, k > 1 || k == -ELOOP || k == -ENOENT, k);
		if (k > 1) {
			ret = cl_write(c, (uint64_t)k, fh, 0, "mine");
			EXPECT(&r, ret == 0, ret);
			cl_release(c, FUSE_RELEASE, (uint64_t)k, fh);
		}
		switch (r.rounds % 3) {
		case 0:
			ret = CALL(c, FUSE_MKNOD, c->rw, ARG(mn), STR("n"));
			break;
		case 1:
			ret = CALL(c, FUSE_MKDIR, c->rw, ARG(mk), STR("n"));
			break;
		default:
			ret = CALL(c, FUSE_SYMLINK, c->rw, STR("n"), STR("../canary/made"));
		}
		EXPECT(&r, ret == 0 || ret == -EEXIST, ret);
		/* the host's link is removed by the host; the guest's own things by it */
		if (CALL(c, FUSE_UNLINK, c->rw, STR("n")) < 0)
			CALL(c, FUSE_RMDIR, c->rw, STR("n"));
	}
	race_stop(&r);
	unlink(cl_path(c, "share/n"));
	rmdir(cl_path(c, "share/n"));
	assert_null(cl_get(c, "canary/new"));
	canary_same(f);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_case41_race_dir_lookup),
		T(test_case42_race_file_open),
		T(test_case43_race_readdir),
		T(test_case44_race_rename),
		T(test_case45_race_link),
		T(test_case46_race_moved_out),
		T(test_case47_race_setid),
		T(test_case48_race_create),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
