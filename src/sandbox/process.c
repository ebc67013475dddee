/* The session's process (see process.h). */
#include <string.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/process.h"

int sandbox_process_init(struct sandbox_process *sp, const struct image_config *cfg,
			 char *const *args, size_t nargs, gantry_error_t *err)
{
	static char *const no_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
					"/sbin:/bin",
					NULL };
	struct agent_process *p = &sp->p;

	memset(sp, 0, sizeof(*sp));
	image_config_argv(cfg, args, nargs, &sp->argv);
	p->argv = sp->argv;
	p->env = cfg ? cfg->env : no_env;
	p->cwd = cfg && cfg->working_dir[0] ? cfg->working_dir : "/";
	if (cfg && image_config_user(cfg, NULL, &sp->user, err) < 0)
		return -1;
	p->uid = sp->user.uid;
	p->gid = sp->user.gid;
	p->gids = sp->user.groups;
	p->ngids = sp->user.ngroups;
	p->tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
	p->in_fd = STDIN_FILENO;
	p->out_fd = STDOUT_FILENO;
	p->err_fd = STDERR_FILENO;
	p->forward_signals = true;
	return 0;
}

void sandbox_process_free(struct sandbox_process *sp)
{
	image_user_free(&sp->user);
	strv_free(sp->argv);
	sp->argv = NULL;
}
