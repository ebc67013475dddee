/* The session's process (see process.h). */
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/network.h"
#include "sandbox/process.h"

/* base with every variable of extra replacing the one of its name. */
static char **env_merge(char *const *base, char *const *extra)
{
	size_t nb = 0, ne = 0, n = 0;
	char **out;

	while (base[nb])
		nb++;
	while (extra[ne])
		ne++;
	out = xzalloc((nb + ne + 1) * sizeof(*out));
	for (size_t i = 0; i < nb; i++) {
		size_t klen = strcspn(base[i], "=");
		bool replaced = false;

		for (size_t k = 0; k < ne && !replaced; k++)
			replaced = strncmp(extra[k], base[i], klen) == 0 && extra[k][klen] == '=';
		if (!replaced)
			out[n++] = xstrdup(base[i]);
	}
	for (size_t k = 0; k < ne; k++)
		out[n++] = xstrdup(extra[k]);
	return out;
}

int sandbox_process_init(struct sandbox_process *sp, const struct image_config *cfg,
			 char *const *args, size_t nargs, const struct sandbox *sb,
			 const struct sandbox_stdio *io, gantry_error_t *err)
{
	char **proxy = sb ? sandbox_proxy_env(sb) : NULL;
	static char *const no_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
					"/sbin:/bin",
					NULL };
	struct agent_process *p = &sp->p;

	memset(sp, 0, sizeof(*sp));
	image_config_argv(cfg, args, nargs, &sp->argv);
	p->argv = sp->argv;
	p->env = cfg ? cfg->env : no_env;
	if (proxy) {
		sp->env = env_merge(p->env, proxy);
		p->env = sp->env;
		strv_free(proxy);
	}
	p->cwd = cfg && cfg->working_dir[0] ? cfg->working_dir : "/";
	if (cfg && image_config_user(cfg, NULL, &sp->user, err) < 0)
		return -1;
	p->uid = sp->user.uid;
	p->gid = sp->user.gid;
	p->gids = sp->user.groups;
	p->ngids = sp->user.ngroups;
	p->tty = io->tty;
	p->in_fd = io->in;
	p->out_fd = io->out;
	p->err_fd = io->err;
	p->signal_fd = io->signal_fd;
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

void sandbox_process_free(struct sandbox_process *sp)
{
	image_user_free(&sp->user);
	strv_free(sp->argv);
	strv_free(sp->env);
	sp->argv = NULL;
	sp->env = NULL;
}
