/* What the share escape suite's programs share (test_share_escape.c,
 * test_share_escape_ops.c, test_share_escape_races.c): the canary's
 * secret and whether a reply held it, the names in a host directory, and
 * a READDIR call. Include after <cmocka.h> and share_client.h. */
#ifndef GANTRY_TESTS_UNIT_SHARE_ESCAPE_RIG_H
#define GANTRY_TESTS_UNIT_SHARE_ESCAPE_RIG_H

#include <dirent.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECRET "top secret" /* canary/secret's content: never in a reply */

/* Did the last reply carry the canary's secret? */
static bool leaked(const struct cl *c)
{
	return c->ret && memmem(c->out, c->ret, SECRET, strlen(SECRET)) != NULL;
}

/* The names in dir (one level, sorted, "." and ".." left out), as text. */
static char *names_in(const char *dir)
{
	struct dirent **v;
	char *s = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&s, &len);
	int n = scandir(dir, &v, NULL, alphasort);

	for (int i = 0; i < n; i++) {
		if (strcmp(v[i]->d_name, ".") && strcmp(v[i]->d_name, ".."))
			fprintf(f, "%s\n", v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
	fclose(f);
	return s;
}

static int readdir_call(struct cl *c, uint32_t op, uint64_t node, uint64_t fh, uint64_t off)
{
	struct fuse_read_in rd = { .fh = fh, .offset = off, .size = 65536 };

	return CALL(c, op, node, ARG(rd));
}

#endif
