/* The fence's guard list and the checkout it guards by default
 * (fence/guard.h): .git files, linked worktrees, submodules, nesting. */
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"
#include "common/util.h"
#include "fence/guard.h"
#include "skip.h"

struct tree {
	char root[PATH_MAX];
};

static int tree_setup(void **state)
{
	struct tree *t = xzalloc(sizeof(*t));
	char tmpl[] = "/tmp/gantry-fence-XXXXXX";
	char *real;

	assert_non_null(mkdtemp(tmpl));
	real = realpath(tmpl, NULL);
	assert_non_null(real);
	snprintf(t->root, sizeof(t->root), "%s", real);
	free(real);
	*state = t;
	return 0;
}

static int tree_teardown(void **state)
{
	struct tree *t = *state;

	rm_tree(t->root);
	free(t);
	return 0;
}

static char *at(struct tree *t, const char *rel)
{
	char *p;

	xasprintf(&p, "%s/%s", t->root, rel);
	return p;
}

static void mkdirs(struct tree *t, const char *rel)
{
	cleanup_free char *p = at(t, rel);
	gantry_error_t err = NULL;

	if (mkdir_p(p, &err) < 0)
		fail_msg("%s", gantry_error_str(err));
}

static void put(struct tree *t, const char *rel, const char *text)
{
	cleanup_free char *p = at(t, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write_full(fd, text, strlen(text)), 0);
	close(fd);
}

/* The checkout found from rel, relative to the tree ("" for its root). */
static void assert_checkout(struct tree *t, const char *from, const char *want)
{
	cleanup_free char *dir = at(t, from), *w = at(t, want), *got = NULL;
	gantry_error_t err = NULL;
	int r = fence_find_checkout(dir, &got, &err);

	if (r < 0)
		fail_msg("%s: %s", from, gantry_error_str(err));
	assert_int_equal(r, 0);
	if (want[0] == '\0')
		w[strlen(w) - 1] = '\0';
	assert_string_equal(got, w);
}

static void test_parse_gitfile(void **state)
{
	static const struct {
		const char *text;
		const char *want; /* NULL: refused */
	} cases[] = {
		{ "gitdir: /r/.git/worktrees/a\n", "/r/.git/worktrees/a" },
		{ "gitdir: ../.git/modules/sub", "../.git/modules/sub" },
		{ "gitdir: /with space/x \r\n", "/with space/x" },
		{ "gitdir: \n", NULL },
		{ "gitdir:", NULL },
		{ "gitdir /x\n", NULL },
		{ "", NULL },
		{ "ref: refs/heads/main\n", NULL },
	};
	char *out;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = fence_parse_gitfile(cases[i].text, strlen(cases[i].text), &out);

		if (cases[i].want == NULL) {
			assert_int_equal(r, -1);
			continue;
		}
		assert_int_equal(r, 0);
		assert_string_equal(out, cases[i].want);
		free(out);
	}
	/* A NUL inside the path is no path. */
	assert_int_equal(fence_parse_gitfile("gitdir: /a\0b\n", 13, &out), -1);
}

static void test_plain_checkout(void **state)
{
	struct tree *t = *state;

	mkdirs(t, "repo/.git/objects");
	mkdirs(t, "repo/src/deep");
	assert_checkout(t, "repo", "repo");
	assert_checkout(t, "repo/src/deep", "repo");
	/* Inside the git directory itself, the checkout is still its parent. */
	assert_checkout(t, "repo/.git/objects", "repo");
}

/* git worktree add: .git is a file naming .git/worktrees/NAME, whose
 * commondir leads back to the main .git. */
static void test_linked_worktree(void **state)
{
	struct tree *t = *state;
	cleanup_free char *gitfile = NULL, *gitdir = at(t, "main/.git/worktrees/run1");

	mkdirs(t, "main/.git/worktrees/run1");
	mkdirs(t, "main/.gantry-worktrees/run1/sub");
	put(t, "main/.git/worktrees/run1/commondir", "../..\n");
	xasprintf(&gitfile, "gitdir: %s\n", gitdir);
	put(t, "main/.gantry-worktrees/run1/.git", gitfile);
	assert_checkout(t, "main/.gantry-worktrees/run1/sub", "main");

	/* Elsewhere, and with a relative gitdir (worktree.useRelativePaths). */
	mkdirs(t, "main/.git/worktrees/far");
	mkdirs(t, "far");
	put(t, "main/.git/worktrees/far/commondir", "../..\n");
	put(t, "far/.git", "gitdir: ../main/.git/worktrees/far\n");
	assert_checkout(t, "far", "main");
}

/* A submodule's .git names a git directory with no commondir: the
 * submodule is its own checkout. So is a worktree of a bare repository. */
static void test_submodule_and_bare(void **state)
{
	struct tree *t = *state;

	mkdirs(t, "super/.git/modules/sub");
	mkdirs(t, "super/sub");
	put(t, "super/sub/.git", "gitdir: ../.git/modules/sub\n");
	assert_checkout(t, "super/sub", "super/sub");

	mkdirs(t, "bare.git/worktrees/w");
	mkdirs(t, "w");
	put(t, "bare.git/worktrees/w/commondir", "../..\n");
	put(t, "w/.git", "gitdir: ../bare.git/worktrees/w\n");
	assert_checkout(t, "w", "w");
}

static void test_bad_gitfile(void **state)
{
	struct tree *t = *state;
	cleanup_free char *dir = at(t, "odd"), *got = NULL;
	gantry_error_t err = NULL;

	mkdirs(t, "odd");
	put(t, "odd/.git", "not a git file\n");
	assert_int_equal(fence_find_checkout(dir, &got, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not a git file"));
	gantry_error_free(&err);
}

static void test_no_checkout(void **state)
{
	struct tree *t = *state;
	cleanup_free char *got = NULL;
	gantry_error_t err = NULL;

	if (fence_find_checkout(t->root, &got, &err) != 1)
		skip_because("%s is inside a git checkout (%s)", t->root, got ? got : "?");
	assert_null(got);
	assert_int_equal(fence_find_checkout("/nonexistent/gantry", &got, &err), -1);
	gantry_error_free(&err);
}

static void test_guards(void **state)
{
	struct tree *t = *state;
	struct fence_guards g = { 0 };
	gantry_error_t err = NULL;
	cleanup_free char *a = at(t, "a"), *ab = at(t, "a/b"), *f = at(t, "file"),
			  *link = at(t, "link"), *abc = at(t, "a/b/c");

	mkdirs(t, "a/b/c");
	put(t, "file", "x");
	assert_int_equal(symlink(ab, link), 0);

	assert_int_equal(fence_guards_add(&g, a, &err), 0);
	assert_int_equal(fence_guards_add(&g, link, &err), 0); /* a/b, resolved */
	assert_int_equal(fence_guards_add(&g, ab, &err), 0);   /* the same again */
	assert_int_equal(fence_guards_add(&g, abc, &err), 0);
	assert_int_equal(g.n, 3);
	assert_string_equal(g.dirs[1], ab);

	assert_int_equal(fence_guards_add(&g, f, &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "not a directory"));
	gantry_error_free(&err);
	assert_int_equal(fence_guards_add(&g, "/", &err), -1);
	gantry_error_free(&err);
	assert_int_equal(fence_guards_add(&g, "/nonexistent/gantry", &err), -1);
	gantry_error_free(&err);
	assert_int_equal(g.n, 3);

	/* Deepest first, so the outer guard's bind takes the inner ones along. */
	fence_guards_order(&g);
	assert_string_equal(g.dirs[0], abc);
	assert_string_equal(g.dirs[1], ab);
	assert_string_equal(g.dirs[2], a);
	fence_guards_free(&g);
	assert_int_equal(g.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_gitfile),
		cmocka_unit_test_setup_teardown(test_plain_checkout, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_linked_worktree, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_submodule_and_bare, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_bad_gitfile, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_no_checkout, tree_setup, tree_teardown),
		cmocka_unit_test_setup_teardown(test_guards, tree_setup, tree_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
