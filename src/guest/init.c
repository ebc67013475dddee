/* gantry-init: PID 1 of every Gantry guest (see guest.h).
 *
 * Booted as `root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init` with
 * the image on /dev/vdb and, with gantry.rw=1, a writable ext4 on /dev/vdc.
 * In order: dial the host's control port and say HELLO (the host learns the
 * guest is up before anything else happens), mount the pseudo filesystems,
 * assemble the container root (in a sandbox, start its container), say READY
 * (or why not), then serve the host: EXEC, SIGNAL, RESIZE, SHUTDOWN, and in
 * a sandbox MOUNT and UNMOUNT of live shares (mounts.c). Orphans
 * are reaped. SHUTDOWN syncs, unmounts and powers off with the status
 * given. The control connection closing (in test mode), or closing and
 * not answering a dial again within a second, is a SHUTDOWN with status 0;
 * a dial that is answered says HELLO again, and the host (restoring the VM
 * from a snapshot, whose vsock reset cut every connection) sends RENEW
 * (renew.c).
 *
 * Kernel parameters (read from /proc/cmdline, since dotted ones never reach
 * init): gantry.rw=1, gantry.readonly=1, gantry.hostname=NAME, gantry.debug=1,
 * gantry.persist=1 (a persistent sandbox: one long-lived container whose
 * init is `gantry-init --pause`, and each EXEC a `crun exec` into it),
 * gantry.net=ADDR/PREFIX,GATEWAY,DNS (eth0's settings, net.c; without it
 * the guest has only lo), gantry.share=TAG:MODE:CTR once per host directory
 * share, at most 64 (shares.h: TAG is [A-Za-z0-9._-]{1,36}, not . or ..,
 * and names the share's directory in the virtio-fs filesystem tagged
 * gantry-shares, mounted on /run/mnt/gantry-shares; MODE is ro or rw; CTR
 * is the absolute container path, without .. components, base64url-encoded
 * without padding: gantry.share=src:rw:L3dvcmtzcGFjZQ binds the share src
 * on /workspace). A bad share is logged and left out, as are all of them
 * when the hub does not mount. gantry.root=TAG: the container's root is
 * the hub's directory TAG (an OCI bundle's rootfs; gantry-oci), not the
 * image under an overlay; when it cannot be had there is no container.
 * gantry.hostroot=1 with it: that directory is the host's own root (gantry
 * wrap), bound entry by entry on a tmpfs, read-only (rootfs.c).
 *
 * Test mode, for running it on a host without a VM (not as PID 1):
 *   gantry-init --host-dir DIR --state DIR --rootfs DIR [--crun PATH]
 * dials DIR/<port>.sock instead of vsock, uses the given root as it is,
 * keeps its state (bundles, crun's) under --state, reaps as a subreaper and
 * exits with the SHUTDOWN status. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/guest.h"
#include "guest/poweroff.h"
#include "proto/files.h"

#define STATE_DIR	 "/run/gantry"
#define ROOTFS_DIR	 "/run/gantry/rootfs"
#define CRUN_PATH	 "/usr/bin/crun"
#define DEFAULT_HOSTNAME "gantry"
#define CMDLINE_MAX	 4096
#define CONTAINER_NOFILE 65536
#define POLL_MAX	 (2 + GUEST_MAX_SESSIONS * 8)

static void send_hello(struct guest *g)
{
	struct proto_msg m = { .type = PROTO_HELLO };
	struct utsname u;
	cpu_set_t cpus;

	m.u.hello.version = PROTO_VERSION;
	m.u.hello.uptime_ms = guest_now_ms(CLOCK_BOOTTIME);
	m.u.hello.ncpus =
		sched_getaffinity(0, sizeof(cpus), &cpus) == 0 ? (uint32_t)CPU_COUNT(&cpus) : 0;
	m.u.hello.kernel = uname(&u) == 0 ? u.release : "";
	link_send(g, &m);
}

/* READY: empty when processes can run, else why not (within a frame). */
static void send_ready(struct guest *g)
{
	struct proto_msg m = { .type = PROTO_READY };
	char why[1024];

	if (g->rootfs_error) {
		snprintf(why, sizeof(why), "%s", g->rootfs_error);
		m.u.ready.message = why;
	}
	link_send(g, &m);
}

/* --- reaping ------------------------------------------------------------------------ */

static void reap(struct guest *g)
{
	struct signalfd_siginfo si;
	int status;
	pid_t pid;

	while (read(g->sigfd, &si, sizeof(si)) > 0)
		;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (g->container > 0 && pid == g->container) {
			/* Every later EXEC is refused (see session_exec). */
			guest_log("container: its init ended (status 0x%x)", (unsigned)status);
			g->container = 0;
			continue;
		}
		session_reaped(g, pid, status);
	}
}

/* --- boot and shutdown ----------------------------------------------------------------- */

static void mount_fs(const char *source, const char *target, const char *type, unsigned long flags,
		     const char *data)
{
	if (mkdir(target, 0755) < 0 && errno != EEXIST)
		guest_log("mkdir %s: %s", target, strerror(errno));
	if (mount(source, target, type, flags, data) < 0 && errno != EBUSY)
		guest_log("mount %s on %s: %s", type, target, strerror(errno));
}

static void mount_pseudo(void)
{
	const unsigned long common = MS_NOSUID | MS_NODEV | MS_NOEXEC;

	mount_fs("proc", "/proc", "proc", common, NULL);
	mount_fs("sysfs", "/sys", "sysfs", common, NULL);
	/* The kernel mounted devtmpfs already when it mounted the root disk. */
	mount_fs("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	mount_fs("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		 "newinstance,ptmxmode=0666,mode=0620");
	mount_fs("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
	mount_fs("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
	mount_fs("cgroup2", "/sys/fs/cgroup", "cgroup2", common, NULL);
}

/* An initramfs without dev/console leaves init with no fds 0-2. */
static void console_open(void)
{
	int fd;

	if (fcntl(2, F_GETFD) >= 0)
		return;
	fd = open("/dev/console", O_RDWR);
	if (fd < 0)
		fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (fd != i)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

/* gantry.share=: kept when it parses, else logged and left out. */
static void read_share(struct shares *shares, const char *value)
{
	char why[SHARE_WHY_MAX];

	if (!shares_add(shares, value, why))
		guest_log("gantry.share=%.48s: %s; not shared", value, why);
}

/* The gantry.* parameters in buf (kept: cfg points into it), from the
 * kernel's command line or a template's RENEW. */
static void read_params(struct guest_config *cfg, bool *rw, char *buf)
{
	static char host[NETCONF_HOST_MAX + 1], net[64];
	static struct shares shares;
	static struct tmpfs_mounts tmpfs;
	static struct guest_sockets sockets;
	static struct guest_mcpfs mcpfs;
	static char root[SHARE_TAG_MAX + 1];
	unsigned int nets = 0;

	for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n")) {
		if (strcmp(tok, "--") == 0)
			break;
		if (strcmp(tok, "gantry.template=1") == 0)
			cfg->template = true;
		else if (strcmp(tok, "gantry.rw=1") == 0)
			*rw = true;
		else if (strcmp(tok, "gantry.readonly=1") == 0)
			cfg->readonly = true;
		else if (strcmp(tok, "gantry.hostroot=1") == 0)
			cfg->readonly = cfg->host_root = true;
		else if (strcmp(tok, "gantry.oauth=1") == 0)
			cfg->oauth_bridge = true;
		else if (strcmp(tok, "gantry.debug=1") == 0)
			cfg->debug = true;
		else if (strcmp(tok, "gantry.persist=1") == 0)
			cfg->persist = true;
		else if (strncmp(tok, "gantry.hostname=", 16) == 0 && tok[16]) {
			if (netconf_hostname_valid(tok + 16)) {
				snprintf(host, sizeof(host), "%s", tok + 16);
				cfg->hostname = host;
			} else
				guest_log("gantry.hostname=%.64s: not a hostname; using %s",
					  tok + 16, cfg->hostname);
		} else if (strncmp(tok, "gantry.net=", 11) == 0) {
			/* Cut short, a value too long to be valid stays invalid;
			 * of two differing ones, neither is trusted. */
			if (nets++ == 0)
				snprintf(net, sizeof(net), "%s", tok + 11);
			else if (strcmp(net, tok + 11) != 0)
				snprintf(net, sizeof(net), "given twice");
		} else if (strncmp(tok, SHARES_PARAM, sizeof(SHARES_PARAM) - 1) == 0) {
			read_share(&shares, tok + sizeof(SHARES_PARAM) - 1);
		} else if (strncmp(tok, TMPFS_PARAM, sizeof(TMPFS_PARAM) - 1) == 0) {
			char why[SHARE_WHY_MAX];

			if (tmpfs_add(&tmpfs, tok + sizeof(TMPFS_PARAM) - 1, why))
				cfg->tmpfs = &tmpfs;
			else
				guest_log("gantry.tmpfs=%.48s: %s; not mounted",
					  tok + sizeof(TMPFS_PARAM) - 1, why);
		} else if (strncmp(tok, SOCKETS_PARAM, sizeof(SOCKETS_PARAM) - 1) == 0) {
			char why[SHARE_WHY_MAX];

			if (sockets_add(&sockets, tok + sizeof(SOCKETS_PARAM) - 1, why))
				cfg->sockets = &sockets;
			else
				guest_log("gantry.sock=%.48s: %s; not relayed",
					  tok + sizeof(SOCKETS_PARAM) - 1, why);
		} else if (strncmp(tok, MCPFS_PARAM, sizeof(MCPFS_PARAM) - 1) == 0) {
			char why[SHARE_WHY_MAX];

			if (mcpfs_parse(&mcpfs, tok + sizeof(MCPFS_PARAM) - 1, why))
				cfg->mcpfs = &mcpfs;
			else
				guest_log("gantry.mcpfs=%.48s: %s; no fs server",
					  tok + sizeof(MCPFS_PARAM) - 1, why);
		} else if (strncmp(tok, ROOT_PARAM, sizeof(ROOT_PARAM) - 1) == 0) {
			const char *t = tok + sizeof(ROOT_PARAM) - 1;

			/* No fallback to the image: a root that cannot be
			 * had leaves no container, and READY says why. */
			if (shares_tag_valid(t, strlen(t)))
				snprintf(root, sizeof(root), "%s", t);
			else
				snprintf(root, sizeof(root), "..");
			cfg->root_share = root;
		} else if (strncmp(tok, "gantry.ca=", 10) == 0) {
			if (trust_b64_valid(tok + 10))
				cfg->ca = tok + 10;
			else
				guest_log("gantry.ca=: not a certificate; not trusted");
		}
	}
	if (nets)
		cfg->net = net;
	if (shares.n)
		cfg->shares = &shares;
}

/* The kernel's command line: its gantry.* parameters. */
static void read_cmdline(struct guest_config *cfg, bool *rw)
{
	static char buf[CMDLINE_MAX];
	ssize_t n;
	int fd = open("/proc/cmdline", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* The kernel ends it with a newline: without one, the last token was
	 * cut short here, and a share's path cut short is another path. */
	if (buf[n - 1] != '\n') {
		char *last = strrchr(buf, ' ');

		guest_log("/proc/cmdline: over %d bytes; ignoring its last parameter",
			  CMDLINE_MAX - 1);
		*(last ? last : buf) = '\0';
	}
	read_params(cfg, rw, buf);
}

/* The virtio-fs hub every share is a directory of. Without it the guest
 * boots unshared: a share is the host's to fix, not a reason to fail. */
static void mount_shares(struct guest_config *cfg)
{
	int e;

	if ((cfg->shares == NULL && cfg->root_share == NULL) || (e = -mounts_hub()) == 0)
		return;
	guest_log("mount virtiofs %s on %s: %s", SHARES_FS_TAG, SHARES_MOUNT_DIR, strerror(e));
	if (cfg->shares)
		guest_log("%zu share(s) left out", cfg->shares->n);
	cfg->shares = NULL;
}

static __attribute__((noreturn)) void finish(struct guest *g, int status)
{
	session_kill_all(g);
	sync();
	if (!g->cfg.pid1)
		exit(status);
	/* Lazily: a process still dying may hold them; sync made them clean. */
	umount2(g->cfg.rootfs, MNT_DETACH);
	umount2(STATE_DIR "/rw", 0);
	umount2(STATE_DIR "/image", MNT_DETACH);
	mounts_hub_release();
	guest_poweroff(status);
}

/* --- the loop ------------------------------------------------------------------------------- */

static void handle_control(struct guest *g, struct proto_msg *m)
{
	switch (m->type) {
	case PROTO_EXEC:
		session_exec(g, &m->u.exec);
		break;
	case PROTO_SIGNAL:
		session_signal(g, m->u.signal.id, m->u.signal.signo);
		break;
	case PROTO_RESIZE:
		session_resize(g, m->u.resize.id, m->u.resize.rows, m->u.resize.cols);
		break;
	case PROTO_MOUNT:
	case PROTO_UNMOUNT:
		mounts_request(g, m);
		break;
	case PROTO_RENEW:
		renew_request(g, m, 0);
		break;
	case PROTO_SHUTDOWN:
		guest_debug(g, "shutdown %u", m->u.shutdown.status);
		finish(g, (int)m->u.shutdown.status);
		break;
	default:
		link_send_error(g, 0, PROTO_ERR_RUNTIME,
				"unexpected %s frame on the control connection",
				proto_type_name(m->type));
	}
}

static void read_control(struct guest *g)
{
	struct proto_msg m;
	const char *why;
	ssize_t n = proto_decoder_fill(g->dec, g->control);
	int r;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		guest_debug(g, "control connection closed");
		close(g->control);
		g->control = -1;
		return;
	}
	while ((r = proto_decoder_next(g->dec, &m, &why)) > 0) {
		handle_control(g, &m);
		proto_msg_free(&m);
	}
	if (r < 0) {
		guest_log("control connection: %s", why);
		close(g->control);
		g->control = -1;
	}
}

/* The control connection is gone. A restore from a snapshot resets
 * every vsock connection: then the host listens again, and answers our
 * HELLO with RENEW. A host that is gone refuses the dial: we are done. */
static void redial(struct guest *g)
{
	/* Nobody can read their output any more; the container's own
	 * processes run on. */
	session_kill_sessions(g);
	g->control = link_dial_control(&g->cfg, LINK_REDIAL_MS);
	if (g->control < 0) {
		guest_debug(g, "the host is gone");
		return;
	}
	guest_debug(g, "control connection dialled again");
	proto_decoder_init(g->dec);
	send_hello(g);
}

/* A template's boot (gantry.template=1) waits here, its first HELLO
 * said, for the rest of its parameters: the host saves the VM at this
 * point once, and every run from that save (or this boot itself) sends
 * RENEW with fresh entropy, the clock and the config. A restore resets
 * the control connection: dialled again, HELLO again. Returns the config
 * (static: cfg points into it). */
static char *await_config(struct guest *g)
{
	static char config[PROTO_MAX_CONFIG + 1];

	for (;;) {
		struct pollfd p = { .events = POLLIN };
		struct proto_msg m;
		const char *why;
		ssize_t n;
		int r = 0;

		if (g->control < 0)
			redial(g);
		if (g->control < 0)
			finish(g, 1);
		/* The connection of now: a redial made a new one. */
		p.fd = g->control;
		if (poll(&p, 1, -1) < 0)
			continue;
		n = proto_decoder_fill(g->dec, g->control);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		while (n > 0 && (r = proto_decoder_next(g->dec, &m, &why)) > 0) {
			bool got = m.type == PROTO_RENEW && *m.u.renew.config;

			if (got) {
				snprintf(config, sizeof(config), "%s", m.u.renew.config);
				renew_request(g, &m, PROTO_RENEWED_CONFIG);
			} else {
				link_send_error(g, 0, PROTO_ERR_RUNTIME,
						"a template's boot waits for RENEW with its config, "
						"not %s",
						proto_type_name(m.type));
			}
			proto_msg_free(&m);
			if (got)
				return config;
		}
		if (n <= 0 || r < 0) {
			guest_debug(g, "control connection closed before the config");
			close(g->control);
			g->control = -1;
		}
	}
}

static void serve(struct guest *g)
{
	struct pollfd fds[POLL_MAX];
	struct session *owner[POLL_MAX];
	size_t n, i;

	for (;;) {
		session_reap_finished(g);
		if (g->control < 0 && !g->cfg.pid1)
			finish(g, 0); /* test mode: the host is gone */
		if (g->control < 0)
			redial(g);
		if (g->control < 0)
			finish(g, 0);
		n = 0;
		fds[n++] = (struct pollfd){ .fd = g->sigfd, .events = POLLIN };
		fds[n++] = (struct pollfd){ .fd = g->control, .events = POLLIN };
		for (i = 0; i < GUEST_MAX_SESSIONS; i++) {
			struct session *s = g->sessions[i];
			size_t k;

			if (s == NULL)
				continue;
			k = relay_pollfds(s, fds + n, POLL_MAX - n);
			for (size_t j = 0; j < k; j++)
				owner[n + j] = s;
			n += k;
		}
		if (poll(fds, n, -1) < 0) {
			if (errno != EINTR)
				guest_log("poll: %s", strerror(errno));
			continue;
		}
		if (fds[0].revents)
			reap(g);
		for (i = 2; i < n;) {
			struct session *s = owner[i];
			size_t j = i;

			while (j < n && owner[j] == s)
				j++;
			relay_events(s, fds + i, j - i);
			i = j;
		}
		if (fds[1].revents)
			read_control(g);
	}
}

static int parse_args(int argc, char **argv, struct guest_config *cfg)
{
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--host-dir") == 0 && v)
			cfg->host_dir = v;
		else if (strcmp(argv[i], "--state") == 0 && v)
			cfg->state_dir = v;
		else if (strcmp(argv[i], "--rootfs") == 0 && v)
			cfg->rootfs = v;
		else if (strcmp(argv[i], "--crun") == 0 && v)
			cfg->crun = v;
		else if (strcmp(argv[i], "--debug") == 0) {
			cfg->debug = true;
			continue;
		} else if (strcmp(argv[i], "--readonly") == 0) {
			cfg->readonly = true;
			continue;
		} else
			continue; /* the kernel passes unknown parameters on */
		i++;
	}
	if (!cfg->pid1 && !(cfg->host_dir && cfg->state_dir && cfg->rootfs &&
			    strlen(cfg->state_dir) < GUEST_STATE_MAX)) {
		fprintf(stderr, "usage: gantry-init --host-dir DIR --state DIR --rootfs DIR "
				"[--crun PATH] [--readonly] [--debug]\n"
				"(or as PID 1 in a Gantry guest)\n");
		return -1;
	}
	return 0;
}

/* The long-lived container's init (gantry.persist=1): hold the namespaces
 * open and reap what is orphaned inside. Every other signal (a session's
 * `kill 1`) is taken and ignored: the guest ends it with SIGKILL. */
static __attribute__((noreturn)) void pause_main(void)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		if (sigwaitinfo(&all, NULL) == SIGCHLD)
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
	}
}

int main(int argc, char **argv)
{
	static struct guest g = { .control = -1, .sigfd = -1 };
	struct guest_config *cfg = &g.cfg;
	char state[GUEST_PATH_MAX], crun_root[GUEST_PATH_MAX + 8];
	struct netconf net = { 0 };
	uint64_t started;
	sigset_t chld;
	bool rw = false;

	if (argc == 2 && strcmp(argv[1], GUEST_PAUSE_ARG) == 0)
		pause_main();
	if (argc >= 2 && strcmp(argv[1], GUEST_HELPER_ARG) == 0)
		return guest_credential_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], PROTO_FILES_ARG) == 0)
		return guest_files_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], PROTO_INIT_ARG) == 0)
		return guest_reaper_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], PROTO_MCP_ARG) == 0)
		return guest_mcp_proxy_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], PROTO_OPEN_URL_ARG) == 0)
		return guest_open_url_main(argc - 2, argv + 2);
	if (argc >= 2 && strcmp(argv[1], PROTO_OAUTH_ARG) == 0)
		return guest_oauth_main(argc - 2, argv + 2);
	started = guest_now_ms(CLOCK_BOOTTIME);
	cfg->pid1 = getpid() == 1;
	cfg->self = "/sbin/gantry-init";
	cfg->state_dir = STATE_DIR;
	cfg->rootfs = ROOTFS_DIR;
	cfg->crun = CRUN_PATH;
	cfg->hostname = DEFAULT_HOSTNAME;
	cfg->nofile = CONTAINER_NOFILE;
	if (!cfg->pid1) {
		static char self[GUEST_PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

		/* Test mode: bound into the container from where it is. */
		if (n > 0) {
			self[n] = '\0';
			cfg->self = self;
		}
		cfg->state_dir = cfg->rootfs = NULL;
		if (parse_args(argc, argv, cfg) < 0)
			return 2;
	}
	if (cfg->pid1)
		console_open();

	/* First thing: tell the host we are alive. */
	g.control = link_dial_control(cfg, LINK_DIAL_MS);
	if (g.control < 0) {
		guest_log("cannot reach the host on vsock port %d: %s", PROTO_CONTROL_PORT,
			  strerror(errno));
		if (cfg->pid1)
			guest_poweroff(1);
		return 1;
	}
	send_hello(&g);

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	g.sigfd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	g.dec = malloc(sizeof(*g.dec));
	if (g.sigfd < 0 || g.dec == NULL) {
		guest_log("signalfd: %s", strerror(errno));
		finish(&g, 1);
	}
	proto_decoder_init(g.dec);

	if (cfg->pid1) {
		mount_pseudo();
		read_cmdline(cfg, &rw);
		if (cfg->template)
			read_params(cfg, &rw, await_config(&g));
		guest_debug(&g, "started as init at %llu", (unsigned long long)started);
		mount_shares(cfg);
		if (sethostname(cfg->hostname, strlen(cfg->hostname)) < 0)
			guest_log("sethostname: %s", strerror(errno));
		net_setup(&g, cfg->net, &net);
		if (rootfs_assemble(cfg, rw, &g.rootfs_error) < 0) {
			if (g.rootfs_error == NULL)
				g.rootfs_error = strdup("out of memory");
			guest_log("container root: %s", g.rootfs_error ? g.rootfs_error : "?");
		} else
			net_prepare_root(cfg->rootfs);
		guest_debug(&g, "container root assembled");
	} else {
		struct rlimit rl;

		/* Test mode may lack CAP_SYS_RESOURCE: stay within our limit. */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < cfg->nofile)
			cfg->nofile = rl.rlim_max;
		prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
		snprintf(crun_root, sizeof(crun_root), "%s/crun", cfg->state_dir);
		cfg->crun_root = crun_root;
	}
	g.net = &net;
	/* Test mode: the host's network, but the container's files are ours. */
	if (net_write_etc(cfg, &net) < 0)
		guest_log("%s/etc: %s; the container keeps the image's resolv.conf and hosts",
			  cfg->state_dir, strerror(errno));
	trust_write(cfg);
	sockets_start(cfg);
	snprintf(state, sizeof(state), "%s/bundles", cfg->state_dir);
	if (mkdir(state, 0700) < 0 && errno != EEXIST)
		guest_log("mkdir %s: %s", state, strerror(errno));
	if (cfg->persist && g.rootfs_error == NULL)
		crun_container_start(&g);
	guest_debug(&g, "ready");
	send_ready(&g);
	/* A sandbox's console says each boot came up (`gantry logs -console`);
	 * a one-shot's stays quiet, its console is seen only when it fails. */
	if (cfg->persist && !cfg->debug)
		guest_log("ready: %s", g.rootfs_error ? "no container (its root failed)"
						      : "the container runs");
	serve(&g);
}
