/* `gantry wrap`'s plan: what of the host the microVM sees, and the process
 * it runs. Every path is the host's own, so that what git wrote (a linked
 * worktree's `.git` file, its gitdir) and what the orchestrator passed
 * (argv, cwd) mean the same inside.
 *
 *   /                    the host's root, read-only ($HOME, Gantry's state
 *                        and /root hidden by the server: machine_shares.c)
 *   main checkout        read-only, other worktrees beneath it hidden
 *   the worktree         read-write (cwd's `.git` directory or file)
 *   common .git          read-write; hooks/, config, config.worktree kept
 *                        read-only by the server (a hook written inside
 *                        would run on the host)
 *   .gantry/             read-write (the orchestrator's run state)
 *   $HOME                an empty tmpfs, with the harnesses' installs
 *                        (read-only) and logins (read-write) shared back
 *   /tmp, /var/tmp, /run the guest's own tmpfs */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "fence/guard.h"
#include "share/spec.h"
#include "wrap/wrap.h"

/* Protected where they are, and where they are not, not to be made: git
 * reads a commondir file in a git directory as where its config is, and
 * modules/ holds the submodules' git directories (their hooks, config and
 * commondir, nested ones and those with a / in their names), which the
 * guest could also plant for a `git submodule update` on the host. */
#define WRAP_GIT_PROTECTED                                                                         \
	((const char *const[]){ "hooks", "config", "config.worktree", "commondir", "modules", NULL })
#define WRAP_CONFIG_MAX	   (64 * 1024)
#define WRAP_CONFIG_LIST   64 /* entries of a list setting */

static const char *const dropped_env[] = {
	"SSH_AUTH_SOCK", "SSH_AGENT_PID",   "DBUS_SESSION_BUS_ADDRESS", "DISPLAY",
	"WAYLAND_DISPLAY", "XAUTHORITY",    "XDG_RUNTIME_DIR",	    "GPG_AGENT_INFO",
	"LD_PRELOAD",	   "LD_LIBRARY_PATH", "TMUX",		    "TMUX_PANE",
	"STY",		   "WINDOWID",
};

bool wrap_env_dropped(const char *entry)
{
	size_t len = strcspn(entry, "=");

	if (strncmp(entry, "GANTRY_", 7) == 0)
		return true;
	for (size_t i = 0; i < ARRAY_SIZE(dropped_env); i++)
		if (strlen(dropped_env[i]) == len && strncmp(entry, dropped_env[i], len) == 0)
			return true;
	return false;
}

const char *wrap_token_name(const char *spec, char *buf, size_t size)
{
	snprintf(buf, size, "%.*s", (int)strcspn(spec, "@"), spec);
	return buf;
}

/* The shares, gathered before they are ordered and written as specs. */
struct plan {
	struct share_spec v[SHARES_MAX];
	size_t n;
	const char *full; /* a share with more paths to mask than it can hold */
};

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Is path inside dir (or dir itself)? rel (may be NULL) gets the rest. */
static bool within(const char *path, const char *dir, const char **rel)
{
	size_t n = strlen(dir);

	if (strcmp(dir, "/") == 0)
		n = 0;
	else if (strncmp(path, dir, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		return false;
	if (rel)
		*rel = path[n] == '/' ? path + n + 1 : path + n;
	return true;
}

static struct share_spec *plan_add(struct plan *p, const char *path, bool ro, gantry_error_t *err)
{
	struct share_spec *sp;

	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].ctr_path, path) == 0) {
			p->v[i].ro = p->v[i].ro && ro; /* read-write wins */
			return &p->v[i];
		}
	if (p->n == SHARES_MAX) {
		gantry_error(err, 0, "more than %d directories to share", SHARES_MAX);
		return NULL;
	}
	sp = &p->v[p->n];
	snprintf(sp->tag, sizeof(sp->tag), "wrap%zu", p->n);
	sp->host_path = xstrdup(path);
	sp->ctr_path = xstrdup(path);
	sp->ro = ro;
	/* A git directory the guest made or changed anywhere would be obeyed
	 * by git on the host (a gitlink in the index and a nested repository
	 * whose core.fsmonitor runs at the next `git status`, a shell prompt's
	 * included): none is made, and every .git that is there is kept. */
	sp->nogit = true;
	p->n++;
	return sp;
}

/* A mask the share has no room for is never dropped: the plan fails. */
static void mask_add(struct plan *p, struct share_spec *sp, const char *rel, bool hide)
{
	if (!*rel)
		return;
	if (sp->nr_masks == SHARE_MASKS_MAX)
		p->full = sp->host_path;
	else
		sp->masks[sp->nr_masks++] = (struct share_mask){ xstrdup(rel), hide };
}

static int masks_fit(const struct plan *p, gantry_error_t *err)
{
	if (p->full)
		return gantry_error(err, E2BIG,
				    "%s: more than %d paths to protect or hide (worktrees, submodules)",
				    p->full, SHARE_MASKS_MAX);
	return 0;
}

/* The other linked worktrees inside main (their gitdir files under
 * common/worktrees/ say where), hidden from the read-only main checkout. */
static void hide_other_worktrees(struct plan *p, struct share_spec *main_sp,
				 const struct fence_git *g)
{
	cleanup_free char *dir = NULL;
	struct dirent *e;
	DIR *d;

	xasprintf(&dir, "%s/worktrees", g->common);
	d = opendir(dir);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		cleanup_free char *file = NULL, *text = NULL, *wt = NULL;
		gantry_error_t err = NULL;
		const char *rel;
		size_t len;
		char *slash;

		if (e->d_name[0] == '.')
			continue;
		xasprintf(&file, "%s/%s/gitdir", dir, e->d_name);
		if (read_file_max(file, PATH_MAX, &text, &len, &err) < 0 || text == NULL) {
			gantry_error_free(&err);
			continue;
		}
		text[strcspn(text, "\n")] = '\0';
		/* gitdir names the worktree's .git file. */
		slash = strrchr(text, '/');
		if (slash == NULL || slash == text)
			continue;
		*slash = '\0';
		wt = realpath(text, NULL);
		if (wt && strcmp(wt, g->top) != 0 && !within(g->top, wt, NULL) &&
		    within(wt, g->main, &rel))
			mask_add(p, main_sp, rel, true);
	}
	closedir(d);
}

static bool have_socket(const struct sandbox_opts *o, const char *path)
{
	for (size_t i = 0; i < o->nr_sockets; i++)
		if (strcmp(o->sockets[i], path) == 0)
			return true;
	return false;
}

int wrap_opts_socket(void *opaque, const char *path, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;
	cleanup_free char *real = realpath(path, NULL);
	struct stat st;

	if (real == NULL || stat(real, &st) < 0)
		return gantry_error_opt(err, "sockets", " %s: %s", path, strerror(errno));
	if (!S_ISSOCK(st.st_mode))
		return gantry_error_opt(err, "sockets", " %s: not a Unix socket", path);
	if (have_socket(o, real))
		return 0;
	if (o->nr_sockets == WRAP_SOCKETS_MAX)
		return gantry_error_opt(err, "sockets", " %s: more than %d sockets", path,
					WRAP_SOCKETS_MAX);
	o->sockets = xrealloc(o->sockets, (o->nr_sockets + 2) * sizeof(*o->sockets));
	o->sockets[o->nr_sockets++] = steal_pointer(&real);
	o->sockets[o->nr_sockets] = NULL;
	return 0;
}

/* The orchestrator's run sockets: each one under its .gantry/, a few
 * levels deep, relayed at its own path. */
static void plan_sockets(struct sandbox_opts *o, const char *dir, int depth)
{
	struct dirent *e;
	DIR *d;

	if (depth > 3 || (d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL && o->nr_sockets < WRAP_SOCKETS_MAX) {
		cleanup_free char *path = NULL;
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		xasprintf(&path, "%s/%s", dir, e->d_name);
		if (lstat(path, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode))
			plan_sockets(o, path, depth + 1);
		else if (S_ISSOCK(st.st_mode) && !have_socket(o, path))
			wrap_opts_socket(o, path, NULL);
	}
	closedir(d);
}

/* Under common/worktrees/ID/, each of names protected, there or not (one
 * not there cannot be made): what git on the host obeys for that linked
 * worktree as it does the repository's. */
static void protect_worktrees(struct plan *p, struct share_spec *sp, const char *common,
			      const char *const *names)
{
	cleanup_free char *dir = NULL;
	struct dirent *e;
	DIR *d;

	xasprintf(&dir, "%s/worktrees", common);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		for (size_t i = 0; names[i]; i++) {
			cleanup_free char *rel = NULL;

			xasprintf(&rel, "worktrees/%s/%s", e->d_name, names[i]);
			mask_add(p, sp, rel, false);
		}
	}
	closedir(d);
}

static int plan_git(struct plan *p, struct sandbox_opts *o, const struct fence_git *g,
		    gantry_error_t *err)
{
	/* A worktree's submodules' git directories are under its modules/. */
	static const char *const worktree_files[] = { "config.worktree", "commondir", "gitdir",
						      "modules", NULL };
	struct share_spec *sp;
	cleanup_free char *gantry_dir = NULL;

	if (strcmp(g->main, g->top) != 0) {
		sp = plan_add(p, g->main, true, err);
		if (sp == NULL)
			return -1;
		hide_other_worktrees(p, sp, g);
	}
	sp = plan_add(p, g->top, false, err);
	if (sp == NULL)
		return -1;
	/* The worktree's .git (a linked worktree's file naming its git
	 * directory, or the main checkout's own directory) is not the guest's
	 * to change, move or replace: the repository's metadata is written
	 * through the share of its own below. */
	mask_add(p, sp, ".git", false);
	/* The repository's metadata: objects, refs and worktree state are
	 * written from inside; what git would run or obey on the host not. */
	sp = plan_add(p, g->common, false, err);
	if (sp == NULL)
		return -1;
	for (size_t i = 0; WRAP_GIT_PROTECTED[i]; i++)
		mask_add(p, sp, WRAP_GIT_PROTECTED[i], false);
	protect_worktrees(p, sp, g->common, worktree_files);
	if (masks_fit(p, err) < 0)
		return -1;
	xasprintf(&gantry_dir, "%s/.gantry", g->main);
	if (is_dir(gantry_dir)) {
		if (plan_add(p, gantry_dir, false, err) == NULL)
			return -1;
		plan_sockets(o, gantry_dir, 0);
	}
	return 0;
}

/* The real path of path's directory, and path's last name after it. */
static char *real_parent(const char *path)
{
	cleanup_free char *dir = xstrdup(path), *real = NULL;
	char *slash = strrchr(dir, '/'), *out;

	if (slash == NULL || slash == dir || slash[1] == '\0')
		return NULL;
	*slash = '\0';
	real = realpath(dir, NULL);
	if (real == NULL)
		return NULL;
	xasprintf(&out, "%s/%s", real, slash + 1);
	return out;
}

/* In a harness's login share sp (at real), what it lists to protect and
 * its installs: read-only by the server, whatever the guest's kernel asks
 * of the read-write login around them. */
static void protect_harness(struct plan *p, struct share_spec *sp, const char *real,
			    const char *home, const struct wrap_harness *h)
{
	for (int k = 0; k < 2; k++) {
		const char *const *list = k ? h->installs : h->protect;

		for (size_t i = 0; list[i]; i++) {
			cleanup_free char *path = NULL, *found = NULL;
			const char *rel;

			xasprintf(&path, "%s/%s", home, list[i]);
			found = realpath(path, NULL);
			/* One not there: its directory's, and its name, which
			 * then cannot be made. */
			if (found == NULL && errno == ENOENT)
				found = real_parent(path);
			if (found && within(found, real, &rel) && *rel)
				mask_add(p, sp, rel, false);
		}
	}
}

/* The harnesses' installs and logins under home that are there. */
static int plan_home(struct plan *p, const char *home, gantry_error_t *err)
{
	for (const struct wrap_harness *h = wrap_harnesses; h->name; h++)
		for (int rw = 0; rw < 2; rw++) {
			const char *const *list = rw ? h->auth : h->installs;

			for (size_t i = 0; list[i]; i++) {
				cleanup_free char *path = NULL, *real = NULL;
				struct share_spec *sp;

				xasprintf(&path, "%s/%s", home, list[i]);
				real = realpath(path, NULL);
				if (real == NULL || !is_dir(real) || !within(real, home, NULL))
					continue;
				sp = plan_add(p, real, !rw, err);
				if (sp == NULL)
					return -1;
				if (rw)
					protect_harness(p, sp, real, home, h);
			}
		}
	return masks_fit(p, err);
}

static int cmp_ctr(const void *a, const void *b)
{
	return strcmp(((const struct share_spec *)a)->ctr_path,
		      ((const struct share_spec *)b)->ctr_path);
}

static void strv_push(char ***v, size_t *n, char *s)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
}

/* Shares are bound in their order: a directory before what is shared
 * inside it. */
static void plan_write(struct plan *p, struct sandbox_opts *o)
{
	qsort(p->v, p->n, sizeof(p->v[0]), cmp_ctr);
	for (size_t i = 0; i < p->n; i++) {
		strv_push(&o->shares, &o->nr_shares, share_spec_format(&p->v[i]));
		share_spec_free(&p->v[i]);
	}
}

int wrap_plan(const struct wrap_host *h, struct sandbox_opts *o, struct sandbox_process_opts *po,
	      gantry_error_t *err)
{
	static struct plan p; /* SHARES_MAX specs: not for the stack */
	struct fence_git g;
	cleanup_free char *user = NULL, *home = NULL;
	int r;

	memset(&p, 0, sizeof(p));
	/* The user's own -share and wrap.json's go in the same order. */
	for (size_t i = 0; i < o->nr_shares; i++)
		if (p.n < SHARES_MAX && share_spec_parse(o->shares[i], h->cwd, &p.v[p.n], err) == 0)
			p.n++;
		else
			goto fail;
	strv_free(o->shares);
	o->shares = NULL;
	o->nr_shares = 0;

	r = fence_find_git(h->cwd, &g, err);
	if (r < 0)
		goto fail;
	if (r == 0) {
		r = plan_git(&p, o, &g, err);
		fence_git_free(&g);
		if (r < 0)
			goto fail;
	} else if (plan_add(&p, h->cwd, false, err) == NULL) {
		goto fail; /* no checkout: the working directory */
	}
	if (h->home && *h->home == '/' && strcmp(h->home, "/") != 0)
		home = realpath(h->home, NULL);
	if (home && strcmp(home, "/") != 0) {
		cleanup_free char *spec = NULL;

		if (plan_home(&p, home, err) < 0)
			goto fail;
		xasprintf(&spec, "-:0:1777:%s", home);
		strv_push(&o->tmpfs, &o->nr_tmpfs, steal_pointer(&spec));
	}
	strv_push(&o->tmpfs, &o->nr_tmpfs, xstrdup("-:0:1777:/var/tmp"));
	strv_push(&o->tmpfs, &o->nr_tmpfs, xstrdup("-:0:755:/run"));
	plan_write(&p, o);
	if (o->image == NULL) {
		o->root = "/";
		o->host_root = true;
		o->root_readonly = true;
	}

	po->workdir = h->cwd;
	xasprintf(&user, "%u:%u", (unsigned int)h->uid, (unsigned int)h->gid);
	po->user = steal_pointer(&user);
	for (size_t i = 0; h->environ && h->environ[i]; i++)
		if (!wrap_env_dropped(h->environ[i]) && strchr(h->environ[i], '=') &&
		    sandbox_process_opts_env(po, h->environ[i], err) < 0)
			return -1;
	return 0;
fail:
	for (size_t i = 0; i < p.n; i++)
		share_spec_free(&p.v[i]);
	return -1;
}

static int config_error(gantry_error_t *err, const char *path, const char *what)
{
	return gantry_error(err, EINVAL, "%s: %s", path, what);
}

void wrap_config_init(struct wrap_config *c)
{
	*c = (struct wrap_config){ .oauth_bridge = true, .inject_tokens = true, .template = true };
}

void wrap_config_free(struct wrap_config *c)
{
	free(c->mcp_fs_root);
	free(c->mcp_fs_user);
	strv_free(c->mcp_remotes);
	strv_free(c->secrets);
	strv_free(c->secret_files);
	wrap_config_init(c);
}

/* A list of strings (at most WRAP_CONFIG_LIST), or -1. */
static int config_strings(json_t *obj, const char *key, const char *path, char ***out,
			  gantry_error_t *err)
{
	size_t n;

	strv_free(*out);
	*out = NULL;
	if (jsonh_strv(obj, key, WRAP_CONFIG_LIST, out, &n, err) < 0)
		return gantry_error_prefix(err, "%s", path);
	return 0;
}

/* The keys of the sandbox's options: 1 when key was one (taken), 0 when
 * it is not, -1 on a bad value. */
static int config_sandbox_key(const char *key, json_t *v, const char *path,
			      struct sandbox_opts *o, gantry_error_t *err)
{
	size_t i;
	json_t *s;

	if (strcmp(key, "image") == 0 && json_is_string(v)) {
		o->image = xstrdup(json_string_value(v));
	} else if (strcmp(key, "cpus") == 0 && json_is_integer(v) && json_integer_value(v) >= 1 &&
		   json_integer_value(v) <= 1024) {
		o->cpus = (uint64_t)json_integer_value(v);
	} else if (strcmp(key, "memMiB") == 0 && json_is_integer(v) &&
		   json_integer_value(v) >= 64) {
		o->mem_mib = (uint64_t)json_integer_value(v);
	} else if (strcmp(key, "net") == 0 && json_is_boolean(v)) {
		o->net = json_is_true(v);
	} else if (strcmp(key, "allowLocalNet") == 0 && json_is_boolean(v)) {
		o->allow_local_net = json_is_true(v);
	} else if (strcmp(key, "netPolicy") == 0 && json_is_string(v)) {
		o->net_policy = xstrdup(json_string_value(v));
	} else if (strcmp(key, "shares") == 0 || strcmp(key, "sockets") == 0) {
		bool shares = key[1] == 'h';

		if (!json_is_array(v))
			return config_error(err, path, shares ? "shares: a list of share specs" :
								"sockets: a list of paths");
		json_array_foreach(v, i, s) {
			if (!json_is_string(s))
				return config_error(err, path,
						    shares ? "shares: a list of share specs" :
							     "sockets: a list of paths");
			if ((shares ? sandbox_opts_share(o, json_string_value(s), err) :
				      wrap_opts_socket(o, json_string_value(s), err)) < 0)
				return gantry_error_prefix(err, "%s", path);
		}
	} else {
		return 0;
	}
	return 1;
}

int wrap_config_load(const char *path, struct sandbox_opts *o, struct wrap_config *c,
		     gantry_error_t *err)
{
	cleanup_free char *text = NULL;
	json_error_t jerr;
	json_t *root, *v;
	const char *key;
	size_t len;
	int r = -1, k;

	if (read_file_max(path, WRAP_CONFIG_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL)
		return 0;
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL || !json_is_object(root)) {
		json_decref(root);
		return gantry_error(err, EINVAL, "%s: not a JSON object (line %d: %s)", path,
				    jerr.line, jerr.text);
	}
	json_object_foreach(root, key, v) {
		bool *flag = strcmp(key, "oauthBridge") == 0	? &c->oauth_bridge :
			     strcmp(key, "oauthCustody") == 0	? &c->oauth_custody :
			     strcmp(key, "injectTokens") == 0	? &c->inject_tokens :
			     strcmp(key, "template") == 0	? &c->template :
			     strcmp(key, "mcp") == 0		? &c->mcp :
								  NULL;
		char **str = strcmp(key, "mcpFsRoot") == 0 ? &c->mcp_fs_root :
			     strcmp(key, "mcpFsUser") == 0 ? &c->mcp_fs_user :
							     NULL;
		char ***list = strcmp(key, "mcpRemotes") == 0	? &c->mcp_remotes :
			       strcmp(key, "secrets") == 0	? &c->secrets :
			       strcmp(key, "secretFiles") == 0 ? &c->secret_files :
								  NULL;

		if ((k = config_sandbox_key(key, v, path, o, err)) < 0)
			goto out;
		if (k > 0)
			continue;
		if (flag && json_is_boolean(v)) {
			*flag = json_is_true(v);
		} else if (str && json_is_string(v)) {
			free(*str);
			*str = xstrdup(json_string_value(v));
		} else if (list) {
			if (config_strings(root, key, path, list, err) < 0)
				goto out;
		} else {
			gantry_error(err, EINVAL,
				     "%s: `%s`: not a setting, or not of its type (image, cpus, "
				     "memMiB, net, netPolicy, allowLocalNet, shares, sockets, "
				     "oauthBridge, oauthCustody, injectTokens, template, mcp, "
				     "mcpFsRoot, mcpFsUser, mcpRemotes, secrets, secretFiles)",
				     path, key);
			goto out;
		}
	}
	r = 0;
out:
	json_decref(root);
	return r;
}
