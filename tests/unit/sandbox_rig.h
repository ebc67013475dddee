/* What the sandbox library's tests share (test_sandbox.c,
 * test_sandbox_supervisor.c): a GANTRY_HOME in a temporary directory for
 * each test, and a sandbox's directory with the least of a sandbox.json's
 * fields. Include after <cmocka.h>. */
#ifndef GANTRY_TESTS_UNIT_SANDBOX_RIG_H
#define GANTRY_TESTS_UNIT_SANDBOX_RIG_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "common/files.h"
#include "common/settings.h"
#include "common/util.h"
#include "sandbox/state.h"

static char home[64];

static int setup(void **state)
{
	(void)state;
	snprintf(home, sizeof(home), "/tmp/gantry-sbtest.XXXXXX");
	assert_non_null(mkdtemp(home));
	setenv("GANTRY_HOME", home, 1);
	gantry_settings_load();
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rm_tree(home);
	return 0;
}

static void make_dir(const char *name, char **dir)
{
	gantry_error_t err = NULL;

	assert_int_equal(sandbox_dirs_make(&err), 0);
	assert_int_equal(sandbox_dir(name, dir, &err), 0);
	assert_int_equal(mkdir(*dir, 0700), 0);
}

/* A sandbox directory and the least of a sandbox.json's fields. */
static void make_sandbox(const char *name, char **dir, struct sandbox *sb)
{
	make_dir(name, dir);
	sb->name = xstrdup(name);
	sb->image = xstrdup("i");
	sb->image_path = xstrdup("/p");
}

#endif
