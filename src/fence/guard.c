/* The guarded directories of `gantry fence` and the default one, the git
 * checkout around the current directory (see guard.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/files.h"
#include "common/util.h"
#include "fence/guard.h"

const char *const fence_writable[] = { ".git", ".gantry", ".gantry-worktrees", NULL };

int fence_guards_add(struct fence_guards *g, const char *dir, gantry_error_t *err)
{
	cleanup_free char *path = realpath(dir, NULL);
	struct stat st;

	if (path == NULL)
		return gantry_error_errno(err, "%s", dir);
	if (stat(path, &st) < 0)
		return gantry_error_errno(err, "%s", dir);
	if (!S_ISDIR(st.st_mode))
		return gantry_error(err, 0, "%s: not a directory", dir);
	if (strcmp(path, "/") == 0)
		return gantry_error(
			err, 0, "%s: the root cannot be guarded; guard the directories in it", dir);
	for (size_t i = 0; i < g->n; i++)
		if (strcmp(g->dirs[i], path) == 0)
			return 0;
	g->dirs = xrealloc(g->dirs, (g->n + 1) * sizeof(*g->dirs));
	g->dirs[g->n++] = steal_pointer(&path);
	return 0;
}

static int guard_deeper_first(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	if (la != lb)
		return la > lb ? -1 : 1;
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void fence_guards_order(struct fence_guards *g)
{
	/* A path inside another is longer than it: length orders nesting. */
	if (g->n > 1)
		qsort(g->dirs, g->n, sizeof(*g->dirs), guard_deeper_first);
}

void fence_guards_free(struct fence_guards *g)
{
	for (size_t i = 0; i < g->n; i++)
		free(g->dirs[i]);
	free(g->dirs);
	g->dirs = NULL;
	g->n = 0;
}

static char *dup_n(const char *s, size_t n)
{
	char *out = xmalloc(n + 1);

	memcpy(out, s, n);
	out[n] = '\0';
	return out;
}

/* One line of a file git wrote, its end (newline, CR, spaces) trimmed. */
static char *first_line(const char *text, size_t len)
{
	size_t n = 0;

	while (n < len && text[n] != '\n')
		n++;
	while (n > 0 && (text[n - 1] == '\r' || text[n - 1] == ' ' || text[n - 1] == '\t'))
		n--;
	if (n == 0 || memchr(text, '\0', n))
		return NULL;
	return dup_n(text, n);
}

int fence_parse_gitfile(const char *text, size_t len, char **out)
{
	static const char prefix[] = "gitdir: ";
	char *path;

	if (len < sizeof(prefix) || memcmp(text, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	path = first_line(text + sizeof(prefix) - 1, len - (sizeof(prefix) - 1));
	if (path == NULL)
		return -1;
	*out = path;
	return 0;
}

/* base/rel, or rel itself when it is absolute. */
static char *path_join(const char *base, const char *rel)
{
	char *out;

	if (rel[0] == '/')
		return xstrdup(rel);
	xasprintf(&out, "%s/%s", base, rel);
	return out;
}

/* The common git directory of the linked worktree whose git directory is
 * gitdir (its `commondir`), and the main checkout, that directory's parent
 * when it is a `.git`; both NULL when gitdir is a repository of its own (a
 * submodule's), main NULL when the common directory is bare. */
static int common_dir(const char *gitdir, struct fence_git *g, gantry_error_t *err)
{
	cleanup_free char *file = path_join(gitdir, "commondir");
	cleanup_free char *text = NULL, *rel = NULL, *joined = NULL;
	size_t len;
	char *slash;

	if (read_file_max(file, FENCE_GITFILE_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL || (rel = first_line(text, len)) == NULL)
		return 0;
	joined = path_join(gitdir, rel);
	g->common = realpath(joined, NULL);
	if (g->common == NULL)
		return gantry_error_errno(err, "%s (named by %s)", joined, file);
	slash = strrchr(g->common, '/');
	if (strcmp(slash, "/.git") != 0)
		return 0;
	g->main = slash == g->common ? xstrdup("/") : dup_n(g->common, (size_t)(slash - g->common));
	return 0;
}

/* 0 with *g filled when dir holds a .git, 1 when it does not. */
static int checkout_at(const char *dir, struct fence_git *g, gantry_error_t *err)
{
	cleanup_free char *dotgit = path_join(dir, ".git");
	cleanup_free char *text = NULL, *rel = NULL, *gitdir = NULL;
	struct stat st;
	size_t len;

	if (stat(dotgit, &st) < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 1;
		return gantry_error_errno(err, "%s", dotgit);
	}
	if (S_ISDIR(st.st_mode)) {
		g->top = xstrdup(dir);
		g->main = xstrdup(dir);
		g->common = realpath(dotgit, NULL);
		return g->common ? 0 : gantry_error_errno(err, "%s", dotgit);
	}
	if (!S_ISREG(st.st_mode))
		return 1;
	if (read_file_max(dotgit, FENCE_GITFILE_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL || fence_parse_gitfile(text, len, &rel) < 0)
		return gantry_error(err, 0, "%s: not a git file (gitdir: PATH)", dotgit);
	gitdir = path_join(dir, rel);
	g->top = xstrdup(dir);
	if (common_dir(gitdir, g, err) < 0)
		return -1;
	if (g->common == NULL) /* a repository of its own */
		g->common = realpath(gitdir, NULL);
	if (g->main == NULL)
		g->main = xstrdup(dir);
	return g->common ? 0 : gantry_error_errno(err, "%s", gitdir);
}

void fence_git_free(struct fence_git *g)
{
	free(g->top);
	free(g->main);
	free(g->common);
	memset(g, 0, sizeof(*g));
}

int fence_find_git(const char *dir, struct fence_git *g, gantry_error_t *err)
{
	cleanup_free char *d = realpath(dir, NULL);

	memset(g, 0, sizeof(*g));
	if (d == NULL)
		return gantry_error_errno(err, "%s", dir);
	for (;;) {
		int r = checkout_at(d, g, err);
		char *slash;

		if (r != 1) {
			if (r < 0)
				fence_git_free(g);
			return r;
		}
		if (strcmp(d, "/") == 0)
			return 1;
		slash = strrchr(d, '/');
		if (slash == d)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
}

int fence_find_checkout(const char *dir, char **out, gantry_error_t *err)
{
	struct fence_git g;
	int r = fence_find_git(dir, &g, err);

	if (r == 0)
		*out = steal_pointer(&g.main);
	fence_git_free(&g);
	return r;
}
