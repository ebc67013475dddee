/* The session's process (see process.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/network.h"
#include "sandbox/process.h"
#include "sandbox/secrets.h"
#include "secret/broker.h"

/* Whether the NAME=VALUE entries a and b set the same name. */
static bool same_name(const char *a, const char *b)
{
	size_t klen = strcspn(a, "=");

	return strncmp(a, b, klen) == 0 && b[klen] == '=';
}

/* Whether any of v[from..n) sets the name e sets. */
static bool named_in(const char *e, char *const *v, size_t from, size_t n)
{
	for (size_t k = from; k < n; k++)
		if (same_name(e, v[k]))
			return true;
	return false;
}

/* base with every variable of extra replacing the one of its name, and of
 * a name extra gives twice, the later. */
static char **env_merge(char *const *base, char *const *extra)
{
	size_t nb = 0, ne = 0, n = 0;
	char **out;

	while (base[nb])
		nb++;
	while (extra[ne])
		ne++;
	out = xzalloc((nb + ne + 1) * sizeof(*out));
	for (size_t i = 0; i < nb; i++)
		if (!named_in(base[i], extra, 0, ne))
			out[n++] = xstrdup(base[i]);
	for (size_t k = 0; k < ne; k++)
		if (!named_in(extra[k], extra, k + 1, ne))
			out[n++] = xstrdup(extra[k]);
	return out;
}

int sandbox_process_opts_env(struct sandbox_process_opts *o, const char *spec,
			     gantry_error_t *err)
{
	size_t name = strcspn(spec, "=");

	if (name == 0 || spec[name] != '=')
		return gantry_error(err, 0, "variable `%.*s`: want NAME=VALUE", 64, spec);
	o->env = xrealloc(o->env, (o->nr_env + 2) * sizeof(*o->env));
	o->env[o->nr_env++] = xstrdup(spec);
	o->env[o->nr_env] = NULL;
	return 0;
}

int sandbox_process_opts_check(const struct sandbox_process_opts *o, gantry_error_t *err)
{
	if (o == NULL)
		return 0;
	if (o->workdir && o->workdir[0] != '/')
		return gantry_error_opt(err, "workdir", " `%.*s`: want an absolute path", 256,
					o->workdir);
	if (o->entrypoint && !*o->entrypoint && o->nargs == 0)
		return gantry_error_opt(err, "entrypoint",
					" is empty and there is no command after --: nothing to run");
	if (o->user && *o->user == '\0')
		return gantry_error_opt(err, "user", " is empty: want USER[:GROUP] or UID[:GID]");
	return o->serves_bound ? 0 : sandbox_secrets_check(o->secrets, err);
}

static const char default_path[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
				   "/sbin:/bin";

static struct image_config *config_empty(void)
{
	struct image_config *c = xzalloc(sizeof(*c));

	c->env = xzalloc(2 * sizeof(*c->env));
	c->env[0] = xstrdup(default_path);
	c->nenv = 1;
	c->user = xstrdup("");
	c->working_dir = xstrdup("");
	return c;
}

int sandbox_process_apply(struct image_config **cfg, const struct sandbox_process_opts *o,
			  gantry_error_t *err)
{
	struct image_config *c = *cfg;
	struct image_user u;

	if (o->nr_env == 0 && !o->workdir && !o->user && !o->entrypoint)
		return 0;
	if (o->workdir && o->workdir[0] != '/')
		return gantry_error_opt(err, "workdir", " `%.*s`: want an absolute path", 256,
					o->workdir);
	if (c == NULL)
		c = *cfg = config_empty();
	if (o->user) {
		if (image_config_user(c, o->user, &u, err) < 0)
			return gantry_error_prefix_opt(err, "user", "%s", "");
		image_user_free(&u);
		free(c->user);
		c->user = xstrdup(o->user);
	}
	if (o->env) {
		char **next = env_merge(c->env, o->env);

		strv_free(c->env);
		c->env = next;
	}
	for (c->nenv = 0; c->env && c->env[c->nenv]; c->nenv++)
		;
	if (o->workdir) {
		free(c->working_dir);
		c->working_dir = xstrdup(o->workdir);
	}
	if (o->entrypoint) {
		strv_free(c->entrypoint);
		strv_free(c->cmd);
		c->entrypoint = NULL;
		c->nentrypoint = 0;
		c->cmd = NULL;
		c->ncmd = 0;
		if (*o->entrypoint) {
			c->entrypoint = xzalloc(2 * sizeof(*c->entrypoint));
			c->entrypoint[0] = xstrdup(o->entrypoint);
			c->nentrypoint = 1;
		}
	}
	return 0;
}

void sandbox_process_opts_free(struct sandbox_process_opts *o)
{
	strv_free(o->env);
	o->env = NULL;
	o->nr_env = 0;
}

/* Entrypoint and Cmd as Docker's --entrypoint has them: the one given (""
 * none), and the command after it, the image's Cmd gone. */
static void entrypoint_argv(const struct sandbox_process_opts *o, char ***argv)
{
	size_t n = 0;

	*argv = xzalloc((o->nargs + 2) * sizeof(**argv));
	if (*o->entrypoint)
		(*argv)[n++] = xstrdup(o->entrypoint);
	for (size_t i = 0; i < o->nargs; i++)
		(*argv)[n++] = xstrdup(o->args[i]);
}

/* The image's Env (or a PATH), then the proxy's, then the caller's. */
static void env_build(struct sandbox_process *sp, const struct image_config *cfg,
		      const struct sandbox_process_opts *o, const struct sandbox *sb)
{
	static char *const no_env[] = { (char *)default_path, NULL };
	char **proxy = sb ? sandbox_proxy_env(sb) : NULL;
	char *const *env = cfg ? cfg->env : no_env;

	sp->p.env = env;
	if (proxy) {
		sp->env = env_merge(env, proxy);
		sp->p.env = sp->env;
		strv_free(proxy);
	}
	if (o->env) {
		char **next = env_merge(sp->p.env, o->env);

		strv_free(sp->env);
		sp->env = next;
		sp->p.env = sp->env;
	}
}

int sandbox_process_init(struct sandbox_process *sp, const struct image_config *cfg,
			 const struct sandbox_process_opts *o, const struct sandbox *sb,
			 const struct sandbox_stdio *io, gantry_error_t *err)
{
	static const struct sandbox_process_opts none = { 0 };
	struct agent_process *p = &sp->p;

	memset(sp, 0, sizeof(*sp));
	if (o == NULL)
		o = &none;
	if (sandbox_process_opts_check(o, err) < 0)
		return -1;
	if (o->entrypoint)
		entrypoint_argv(o, &sp->argv);
	else
		image_config_argv(cfg, o->args, o->nargs, &sp->argv);
	p->argv = sp->argv;
	env_build(sp, cfg, o, sb);
	p->cwd = o->workdir			   ? o->workdir :
		 cfg && cfg->working_dir[0] ? cfg->working_dir :
					      "/";
	if ((cfg || o->user) && image_config_user(cfg, o->user, &sp->user, err) < 0)
		return o->user ? gantry_error_prefix_opt(err, "user", "%s", "") : -1;
	if (o->secrets) {
		if (secret_store_env(o->secrets, &sp->secrets, err) < 0)
			return -1;
		if (sp->secrets.envp)
			sandbox_process_secrets(sp, sp->secrets.envp);
		if (secret_store_has_bound(o->secrets))
			sandbox_process_secrets(sp, broker_git_env);
	}
	p->uid = sp->user.uid;
	p->gid = sp->user.gid;
	p->gids = o->has_groups ? o->groups : sp->user.groups;
	p->ngids = o->has_groups ? o->ngroups : sp->user.ngroups;
	p->rlimits = o->rlimits;
	p->nrlimits = o->nrlimits;
	p->has_rlimits = o->has_rlimits;
	p->caps = o->caps;
	p->init = o->container_init;
	p->tty = io->tty;
	p->in_fd = io->in;
	p->out_fd = io->out;
	p->err_fd = io->err;
	p->signal_fd = io->signal_fd;
	p->started = io->started;
	p->started_opaque = io->started_opaque;
	return 0;
}

int sandbox_process_run(struct agent *a, struct sandbox_process *sp,
			const struct sandbox_stdio *io, struct agent_result *res,
			gantry_error_t *err)
{
	int r;

	if (io->catch_signals && io->catch_signals(true, err) < 0)
		return -1;
	r = agent_run(a, &sp->p, res, err);
	if (io->catch_signals)
		io->catch_signals(false, NULL);
	return r;
}

char **sandbox_env_overlay(char *const *base, char *const *over)
{
	size_t nb = 0, no = 0, n = 0;
	char **out;

	while (base && base[nb])
		nb++;
	while (over[no])
		no++;
	out = xzalloc((nb + no + 1) * sizeof(*out));
	for (size_t i = 0; i < nb; i++)
		if (!named_in(base[i], over, 0, no))
			out[n++] = base[i];
	for (size_t k = 0; k < no; k++)
		out[n++] = over[k];
	return out;
}

void sandbox_process_secrets(struct sandbox_process *sp, char *const *secrets)
{
	char **envp = sandbox_env_overlay(sp->p.env, secrets);

	free(sp->envp);
	sp->envp = envp;
	sp->p.env = sp->envp;
}

void sandbox_process_free(struct sandbox_process *sp)
{
	image_user_free(&sp->user);
	strv_free(sp->argv);
	strv_free(sp->env);
	free(sp->envp);
	secret_env_free(&sp->secrets);
	sp->argv = NULL;
	sp->env = NULL;
	sp->envp = NULL;
}
