/* gantry: the command-line entry point and its dispatch table. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "cli/commands.h"
#include "oci/oci.h"
#include "confine/confine.h"
#include "common/log.h"
#include "common/settings.h"
#include "common/util.h"
#include "net/net.h"
#include "egress/egress.h"
#include "mcp/gateway.h"
#include "net/worker.h"
#include "sandbox/spawn.h"
#include "supervisor/supervisor.h"
#include "tui/tui.h"
#include "share/worker.h"
#include "machine/worker.h"

static const struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "start", cmd_start, "create and boot a persistent sandbox" },
	{ "exec", cmd_exec, "run a command in a sandbox, or in a fresh microVM" },
	{ "ls", cmd_ls, "list sandboxes" },
	{ "stop", cmd_stop, "stop a sandbox, keeping its files" },
	{ "resume", cmd_resume, "boot a stopped sandbox again" },
	{ "pause", cmd_pause, "hold a running sandbox's vCPUs still (nothing saved)" },
	{ "unpause", cmd_unpause, "let a paused sandbox run on" },
	{ "snapshot", cmd_snapshot, "save a running sandbox as a snapshot; list and remove them" },
	{ "fork", cmd_fork, "snapshot a running sandbox and start clones of it" },
	{ "delete", cmd_delete, "stop and remove a sandbox" },
	{ "logs", cmd_logs, "print or follow a sandbox's log or guest console" },
	{ "cp", cmd_cp, "copy files between the host and a sandbox" },
	{ "stats", cmd_stats, "show the CPU, memory, disk and network each sandbox uses" },
	{ "top", cmd_top, "list the processes of a sandbox's container" },
	{ "inspect", cmd_inspect, "show a sandbox's configuration, state and paths" },
	{ "ports", cmd_ports, "publish, unpublish and list a sandbox's ports" },
	{ "share", cmd_share, "add, remove and list a sandbox's host directory shares" },
	{ "secret", cmd_secret, "set, remove and list a sandbox's secrets" },
	{ "audit", cmd_audit, "show a sandbox's security events" },
	{ "net", cmd_net, "show a sandbox's network traffic" },
	{ "net-policy", cmd_net_policy, "change or show a sandbox's egress policy" },
	{ "image", cmd_image, "pull, list and remove images; registry logins" },
	{ "run", cmd_run, "boot a kernel in a microVM, no sandbox state" },
	{ "fence", cmd_fence, "run a host command in a PID namespace, the checkout read-only" },
	{ "mcp", cmd_mcp, "the tools a running sandbox's MCP gateway shows its guest" },
	{ "wrap", cmd_wrap, "run a command in a microVM as if it were a child process (agents)" },
	{ "serve", cmd_serve, "serve the manager API on a Unix socket" },
	{ "tui", tui_main, "a terminal dashboard of every sandbox" },
	{ "doctor", cmd_doctor, "check this host for what Gantry needs" },
	{ "version", cmd_version, "print the version" },
	{ SUPERVISOR_ROLE, supervisor_main, NULL },	  /* hidden: a sandbox's supervisor */
	{ NET_WORKER_ROLE, net_worker_main, NULL },	  /* hidden: a sandbox's network */
	{ EGRESS_WORKER_ROLE, egress_worker_main, NULL }, /* hidden: injected secrets */
	{ MCP_WORKER_ROLE, mcp_worker_main, NULL },	  /* hidden: the MCP gateway */
	{ VMM_WORKER_ROLE, vmm_worker_main, NULL },	  /* hidden: a sandbox's VM */
	{ SHARE_WORKER_ROLE, share_worker_main, NULL },	  /* hidden: its share server */
	{ CONFINE_PROBE_ROLE, confine_probe_main, NULL }, /* hidden: the seccomp tests' */
};

/* What a Docker or Podman user types, and what Gantry calls it. */
static const struct {
	const char *word, *ours;
} docker_words[] = {
	{ "ps", "ls" },
	{ "list", "ls" },
	{ "rm", "delete" },
	{ "remove", "delete" },
	{ "kill", "stop (or delete)" },
	{ "create", "start" },
	{ "restart", "stop, then gantry resume" },
	{ "attach", "exec NAME" },
	{ "images", "image ls" },
	{ "pull", "image pull" },
	{ "rmi", "image rm" },
	{ "login", "image login" },
	{ "logout", "image logout" },
	{ "port", "ports ls" },
	{ "top", "stats" },
};

static void usage(FILE *out)
{
	fprintf(out, "Usage: gantry COMMAND [FLAGS] [ARGS]\n\n"
		     "Gantry runs OCI images in Linux microVMs on KVM.\n\nCommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
		if (commands[i].summary)
			fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(out,
		"\nRun `gantry COMMAND -help` for a command's flags.\n\n"
		"Flags are spelled -flag or --flag, a value after a space or '=' (-cpus 2,\n"
		"--cpus=2); -flag=false turns a boolean off; `--` ends the flags. -h, -help\n"
		"and --help show a command's help.\n\n"
		"Exit status: 0 done; 1 the operation failed; 2 the command line was wrong (a\n"
		"flag, an argument, a value, a spec or a name: nothing was done); 130\n"
		"interrupted. exec and run return the workload's status, or 125 when Gantry\n"
		"failed, 126 when the command cannot be run and 127 when it is not found.\n");
}

/* The library's names for the options it checks (struct sandbox_opts's
 * fields, struct vmm_config's for `run`), as the flags that set them. */
static const char *flag_of(const char *option)
{
	static const struct {
		const char *option, *flag;
	} flags[] = {
		{ "cpus", "-cpus" },
		{ "mem_mib", "-mem" },
		{ "disk_mib", "-disk-size" },
		{ "rwlayer", "-rwlayer" },
		{ "ports", "-p" },
		{ "shares", "-share" },
		{ "net_policy", "-net-policy" },
		{ "allow_local_net", "-allow-local-net" },
		{ "proxy", "-proxy" },
		{ "no_proxy", "-no-proxy" },
		{ "proxy_enforce", "-proxy-enforce" },
		{ "isolation", "-process-isolation" },
		{ "kernel", "-kernel" },
		{ "vsock_dir", "-vsock" },
		{ "env", "-e" },
		{ "workdir", "-w" },
		{ "user", "-u" },
		{ "entrypoint", "-entrypoint" },
		{ "sockets", "-socket" },
		{ "ephemeral", "--ephemeral" },
		{ "replace", "--replace" },
		{ "with_secrets", "-with-secrets" },
		{ "n", "-n" },
		{ "prefix", "-as" },
		{ "mcp_remotes", "-mcp-remote" },
		{ "mcp_fs_root", "-mcp-fs-root" },
		{ "mcp_fs_user", "-mcp-fs-user" },
		{ "oauth_custody", "-oauth-custody" },
	};

	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (strcmp(option, flags[i].option) == 0)
			return flags[i].flag;
	return NULL;
}

/* A hidden role's process is named for it (gantry-net, gantry-vmm...),
 * where ps, top and ss would otherwise say "exe" (it runs /proc/self/exe). */
static void name_role(const char *role)
{
	char comm[16];
	size_t n = strcspn(role, "-");

	if (strcmp(role + n, "-worker") != 0)
		n = strlen(role);
	snprintf(comm, sizeof(comm), "gantry-%.*s", (int)n, role);
	prctl(PR_SET_NAME, comm, 0, 0, 0);
}

int main(int argc, char **argv)
{
	const char *base = strrchr(argv[0], '/');

	/* The OCI runtime, by the name it is installed under. */
	if (strcmp(base ? base + 1 : argv[0], "gantry-oci") == 0)
		return oci_main(argc, argv);
	gantry_error_set_namer(flag_of);
	/* The CLI's settings are its environment's, read once, here. */
	gantry_settings_load();
	if (argc < 2) {
		/* On a terminal, the dashboard; else what there is to type. */
		if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
			return tui_main(0, argv + argc);
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-version") == 0)
		return cmd_version(argc - 2, argv + 2);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "-help") == 0 ||
	    strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (strncmp(argv[1], "__", 2) == 0)
			name_role(argv[1] + 2);
		return commands[i].fn(argc - 2, argv + 2);
	}
	for (size_t i = 0; i < ARRAY_SIZE(docker_words); i++) {
		if (strcmp(argv[1], docker_words[i].word) == 0) {
			log_error("unknown command `%s`: did you mean gantry %s? (see gantry -help)",
				  argv[1], docker_words[i].ours);
			return 2;
		}
	}
	log_error("unknown command `%s` (see gantry -help)", argv[1]);
	return 2;
}
