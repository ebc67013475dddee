/* What `gantry fence` makes read-only: the guarded directories, each with
 * the names under it that stay writable, and the git checkout a fence
 * guards when it is given none. Pure path logic; fence.c mounts. */
#ifndef GANTRY_FENCE_GUARD_H
#define GANTRY_FENCE_GUARD_H

#include <stddef.h>

#include "common/error.h"

/* Under each guarded directory these stay writable, as the repository's
 * own metadata and Gantry's run state and worktrees must (NULL-ended). */
extern const char *const fence_writable[];

/* A .git file longer than this is not one git wrote. */
#define FENCE_GITFILE_MAX 4096

struct fence_guards {
	char **dirs; /* absolute, symlinks resolved, no duplicates */
	size_t n;
};

/* Add dir, resolved with realpath(3); it must be a directory other than /
 * (a mount over the root would not reach the paths already resolved from
 * it). A directory given twice is kept once. */
int fence_guards_add(struct fence_guards *g, const char *dir, gantry_error_t *err);
/* Deepest first: a guard inside another is mounted before the outer one's
 * recursive bind takes it along, so each keeps its own writable names. */
void fence_guards_order(struct fence_guards *g);
void fence_guards_free(struct fence_guards *g);

/* The path a `.git` file names ("gitdir: PATH"), as written (maybe
 * relative to the file's directory); -1 when text is not such a file. */
int fence_parse_gitfile(const char *text, size_t len, char **out);

/* The checkout a process in dir works on: the directory holding the
 * nearest `.git` above dir; for a linked worktree (its `.git` a file whose
 * git directory has a `commondir`), the main checkout of the repository,
 * the parent of its common `.git` directory. 0 with *out set (malloc()ed),
 * 1 when dir is in no checkout, -1 on error. */
int fence_find_checkout(const char *dir, char **out, gantry_error_t *err);

/* The git checkout around a directory, as `gantry wrap` shares it. */
struct fence_git {
	char *top;    /* the worktree: the nearest directory above holding .git */
	char *main;   /* the main checkout (top itself unless a linked worktree) */
	char *common; /* the repository's common git directory, resolved */
};

/* fence_find_checkout's walk, with the worktree and the common git
 * directory too: 0 with *g set, 1 when dir is in no checkout, -1 on
 * error. */
int fence_find_git(const char *dir, struct fence_git *g, gantry_error_t *err);
void fence_git_free(struct fence_git *g);

#endif
