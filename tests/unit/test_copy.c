/* Unit tests for sandbox/untar.c's sandbox_untar(): what `gantry cp` writes
 * on the host from a tar stream the guest made. A hostile stream (.., an
 * absolute name, another top, a write through a symlink it planted, a
 * device, a hard link, set-id bits) writes nothing outside the
 * destination. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "sandbox/copy.h"

struct entry {
	const char *name;
	mode_t type;
	mode_t perm;
	const char *data; /* a file's; a symlink's or hard link's target */
};

struct dir {
	char path[64];
	char outside[96]; /* beside the destination: must stay empty */
};

static int setup(void **state)
{
	struct dir *d = xzalloc(sizeof(*d));

	snprintf(d->path, sizeof(d->path), "/tmp/gantry-copy-XXXXXX");
	assert_non_null(mkdtemp(d->path));
	snprintf(d->outside, sizeof(d->outside), "%s/outside", d->path);
	assert_int_equal(mkdir(d->outside, 0755), 0);
	*state = d;
	return 0;
}

static int teardown(void **state)
{
	struct dir *d = *state;
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->path);
	assert_int_equal(system(cmd), 0);
	free(d);
	return 0;
}

/* A tar stream of entries in a memfd, at its start. */
static int tar_of(const struct entry *e, size_t n)
{
	int fd = memfd_create("tar", MFD_CLOEXEC);
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();

	assert_true(fd >= 0);
	archive_write_set_format_pax_restricted(a);
	assert_int_equal(archive_write_open_fd(a, fd), ARCHIVE_OK);
	for (size_t i = 0; i < n; i++) {
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, e[i].name);
		archive_entry_set_filetype(ae, e[i].type);
		archive_entry_set_perm(ae, e[i].perm);
		if (e[i].type == AE_IFLNK)
			archive_entry_set_symlink(ae, e[i].data);
		if (e[i].type == AE_IFREG && e[i].data && e[i].perm == 0) {
			/* perm 0 with data: a hard link to data */
			archive_entry_set_perm(ae, 0644);
			archive_entry_set_hardlink(ae, e[i].data);
		} else if (e[i].type == AE_IFREG) {
			archive_entry_set_size(ae, e[i].data ? (la_int64_t)strlen(e[i].data) : 0);
		}
		if (e[i].type == AE_IFCHR)
			archive_entry_set_rdev(ae, makedev(1, 3));
		assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
		if (e[i].type == AE_IFREG && e[i].data && e[i].perm)
			assert_int_equal(archive_write_data(a, e[i].data, strlen(e[i].data)),
					 (la_ssize_t)strlen(e[i].data));
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(ae);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static int untar(const struct entry *e, size_t n, const char *base, const char *dest,
		 bool archive, struct sandbox_copy_result *res, char **why)
{
	struct sandbox_copy_opts o = { .archive = archive };
	gantry_error_t err = NULL;
	bool refused;
	int fd = tar_of(e, n), r;

	*res = (struct sandbox_copy_result){ 0 };
	r = sandbox_untar(fd, base, dest, &o, NULL, res, &refused, &err);
	close(fd);
	*why = err ? xstrdup(gantry_error_str(err)) : NULL;
	gantry_error_free(&err);
	return r;
}

static char *slurp(const char *dir, const char *name)
{
	char path[256], buf[256];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return xstrdup(buf);
}

static bool empty(const char *dir)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", dir);
	return system(cmd) == 0;
}

static void test_tree_as_the_destination(void **state)
{
	struct dir *d = *state;
	static const struct entry e[] = {
		{ "src", AE_IFDIR, 0750, NULL },
		{ "src/a.txt", AE_IFREG, 0644, "alpha" },
		{ "src/sub", AE_IFDIR, 0755, NULL },
		{ "src/sub/b.txt", AE_IFREG, 04755, "beta" },
		{ "src/link", AE_IFLNK, 0777, "/etc/passwd" },
	};
	struct sandbox_copy_result res;
	char dest[128], *why, *s, target[64];
	struct stat st;
	ssize_t n;

	snprintf(dest, sizeof(dest), "%s/copy", d->path);
	assert_int_equal(untar(e, ARRAY_SIZE(e), "src", dest, false, &res, &why), 0);
	assert_int_equal(res.files, 2);
	assert_int_equal(res.dirs, 2);
	assert_int_equal(res.links, 1);
	s = slurp(dest, "a.txt");
	assert_string_equal(s, "alpha");
	free(s);
	s = slurp(dest, "sub/b.txt");
	assert_string_equal(s, "beta");
	free(s);
	/* The set-id bit dropped, the rest kept; the directory's mode set last. */
	snprintf(target, sizeof(target), "%s", "sub/b.txt");
	{
		char p[256];

		snprintf(p, sizeof(p), "%s/%s", dest, target);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0755);
		snprintf(p, sizeof(p), "%s", dest);
		assert_int_equal(stat(p, &st), 0);
		assert_int_equal(st.st_mode & 07777, 0750);
		snprintf(p, sizeof(p), "%s/link", dest);
		n = readlink(p, target, sizeof(target) - 1);
		assert_true(n > 0);
		target[n] = '\0';
		assert_string_equal(target, "/etc/passwd");
	}
	/* Into an existing directory: below it, under the source's name. */
	assert_int_equal(untar(e, ARRAY_SIZE(e), "src", d->outside, false, &res, &why), 0);
	s = slurp(d->outside, "src/a.txt");
	assert_string_equal(s, "alpha");
	free(s);
}

static void test_one_file(void **state)
{
	struct dir *d = *state;
	static const struct entry e[] = { { "f.bin", AE_IFREG, 0600, "data" } };
	struct sandbox_copy_result res;
	char dest[128], *why, *s;

	snprintf(dest, sizeof(dest), "%s/renamed", d->path);
	assert_int_equal(untar(e, 1, "f.bin", dest, false, &res, &why), 0);
	s = slurp(d->path, "renamed");
	assert_string_equal(s, "data");
	free(s);
	/* Again over it: replaced. */
	assert_int_equal(untar(e, 1, "f.bin", dest, false, &res, &why), 0);
	assert_int_equal(res.files, 1);
}

/* Each stream is refused, and nothing lands outside its destination. */
static void test_hostile_streams(void **state)
{
	struct dir *d = *state;
	static const struct entry dotdot[] = {
		{ "src", AE_IFDIR, 0755, NULL },
		{ "src/../outside/x", AE_IFREG, 0644, "escaped" },
	};
	static const struct entry absolute[] = { { "/tmp/gantry-copy-abs", AE_IFREG, 0644, "x" } };
	static const struct entry other_top[] = {
		{ "src", AE_IFDIR, 0755, NULL },
		{ "outside/x", AE_IFREG, 0644, "x" },
	};
	static const struct entry through_link[] = {
		{ "src", AE_IFDIR, 0755, NULL },
		{ "src/l", AE_IFLNK, 0777, "../outside" },
		{ "src/l/x", AE_IFREG, 0644, "through" },
	};
	static const struct {
		const struct entry *e;
		size_t n;
		const char *why;
	} cases[] = {
		{ dotdot, ARRAY_SIZE(dotdot), "not below" },
		{ absolute, ARRAY_SIZE(absolute), "not below" },
		{ other_top, ARRAY_SIZE(other_top), "not below" },
		{ through_link, ARRAY_SIZE(through_link), "src/l/x" },
	};
	struct sandbox_copy_result res;
	char dest[128], *why;

	snprintf(dest, sizeof(dest), "%s/copy", d->path);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		assert_int_equal(untar(cases[i].e, cases[i].n, "src", dest, false, &res, &why),
				 -1);
		assert_non_null(why);
		if (strstr(why, cases[i].why) == NULL)
			fail_msg("case %zu: %s", i, why);
		free(why);
		assert_true(empty(d->outside));
	}
	assert_int_equal(access("/tmp/gantry-copy-abs", F_OK), -1);
}

static void test_a_planted_symlink_at_the_destination_is_replaced(void **state)
{
	struct dir *d = *state;
	static const struct entry e[] = { { "f", AE_IFREG, 0644, "mine" } };
	struct sandbox_copy_result res;
	char dest[128], target[128], *why, *s;

	snprintf(dest, sizeof(dest), "%s/f", d->path);
	snprintf(target, sizeof(target), "%s/victim", d->outside);
	assert_int_equal(symlink(target, dest), 0);
	assert_int_equal(untar(e, 1, "f", dest, false, &res, &why), 0);
	assert_int_equal(access(target, F_OK), -1);
	s = slurp(d->path, "f");
	assert_string_equal(s, "mine");
	free(s);
}

static void test_devices_and_hard_links_are_skipped(void **state)
{
	struct dir *d = *state;
	static const struct entry e[] = {
		{ "src", AE_IFDIR, 0755, NULL },
		{ "src/null", AE_IFCHR, 0666, NULL },
		{ "src/fifo", AE_IFIFO, 0644, NULL },
		{ "src/hard", AE_IFREG, 0, "/etc/shadow" },
		{ "src/ok", AE_IFREG, 0644, "ok" },
	};
	struct sandbox_copy_result res;
	char dest[128], *why, path[160];

	snprintf(dest, sizeof(dest), "%s/copy", d->path);
	assert_int_equal(untar(e, ARRAY_SIZE(e), "src", dest, false, &res, &why), 0);
	assert_int_equal(res.skipped, 3);
	assert_int_equal(res.files, 1);
	snprintf(path, sizeof(path), "%s/null", dest);
	assert_int_equal(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/hard", dest);
	assert_int_equal(access(path, F_OK), -1);
}

static void test_a_corrupt_stream_is_one_error(void **state)
{
	struct dir *d = *state;
	struct sandbox_copy_opts o = { 0 };
	struct sandbox_copy_result res;
	gantry_error_t err = NULL;
	char dest[128];
	bool refused;
	int fd = memfd_create("junk", MFD_CLOEXEC);

	assert_int_equal(write(fd, "not a tar stream at all", 23), 23);
	lseek(fd, 0, SEEK_SET);
	snprintf(dest, sizeof(dest), "%s/copy", d->path);
	assert_int_equal(sandbox_untar(fd, "src", dest, &o, NULL, &res, &refused, &err), -1);
	assert_false(refused);
	assert_non_null(strstr(gantry_error_str(err), "tar stream"));
	gantry_error_free(&err);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree_as_the_destination, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_planted_symlink_at_the_destination_is_replaced,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_devices_and_hard_links_are_skipped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_a_corrupt_stream_is_one_error, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
