/* A worker's confinement, the worker's side: its arguments, the layers
 * applied and probed one by one, the report (see confine.h; the spawner's
 * side is spawn.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <linux/securebits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/child.h"
#include "common/log.h"
#include "common/util.h"
#include "confine/confine.h"

/* Rights of newer Landlock ABIs than Debian 12's headers name. */
#define LL_FS_TRUNCATE	  (1ULL << 14) /* ABI 3 */
#define LL_FS_IOCTL_DEV	  (1ULL << 15) /* ABI 5 */
#define LL_NET_BIND_TCP	  (1ULL << 0)  /* ABI 4 */
#define LL_NET_CONN_TCP	  (1ULL << 1)
#define LL_SCOPE_ABSTRACT (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL	  (1ULL << 1)

#define SECBITS_LOCKED                                                                             \
	(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |                           \
	 SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE |   \
	 SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED)

int confine_arg(struct confine_opts *o, const char *opt, const char *val)
{
	char *end;
	long v;

	if (strcmp(opt, "--self-test") == 0) {
		o->self_test = true;
		return 1;
	}
	if (strcmp(opt, "--isolation") == 0)
		return val && confine_mode_parse(val, &o->mode, NULL) == 0 ? 2 : -1;
	if (strcmp(opt, "--ns") == 0) {
		if (val == NULL)
			return -1;
		errno = 0;
		o->spawn.ns = strtoul(val, &end, 0);
		return errno || *end || end == val ? -1 : 2;
	}
	if (strcmp(opt, "--userns-errno") == 0) {
		if (val == NULL)
			return -1;
		errno = 0;
		v = strtol(val, &end, 10);
		o->spawn.userns_errno = (int)v;
		return errno || *end || end == val ? -1 : 2;
	}
	return 0;
}

int confine_args_with(struct confine_opts *o, int argc, char **argv, confine_own_arg own,
		      void *opaque)
{
	for (int i = 0; i < argc; i++) {
		int n = confine_arg(o, argv[i], i + 1 < argc ? argv[i + 1] : NULL);

		if (n == 0 && own)
			n = own(opaque, argv[i], argv + i + 1, argc - i - 1);
		if (n <= 0)
			return -1;
		i += n - 1;
	}
	return 0;
}

int confine_args(struct confine_opts *o, int argc, char **argv, bool *self_test)
{
	if (confine_args_with(o, argc, argv, NULL, NULL) < 0)
		return -1;
	*self_test = o->self_test;
	return 0;
}

int confine_self_test_again(int argc, char **argv, const char *role, unsigned long extra_ns)
{
	enum confine_mode mode = CONFINE_REQUIRED;
	char ns[24], userns[24];
	char *args[] = { "gantry", (char *)role, "--self-test", "--isolation", NULL, "--ns", ns,
			 "--userns-errno", userns, NULL };
	gantry_error_t err = NULL;
	struct confine_spawn sp;
	int status = 0;
	pid_t pid;

	if (argc < 1 || strcmp(argv[0], "--self-test") != 0 || argc > 3 || argc == 2 ||
	    (argc == 3 && strcmp(argv[1], "--isolation") != 0))
		return -1;
	if (argc == 3 && confine_mode_parse(argv[2], &mode, &err) < 0) {
		gantry_error_print(&err);
		return 2;
	}
	args[4] = (char *)confine_mode_name(mode);
	fflush(stdout);
	pid = confine_fork(mode, extra_ns, &sp);
	if (pid < 0) {
		perror("gantry: fork");
		return 1;
	}
	confine_spawn_format(&sp, ns, userns);
	if (pid == 0) {
		close_range(3, ~0U, 0);
		child_exec_self(args, "self-test worker");
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

/* --- the report --------------------------------------------------------------------------- */

static struct confine_prop *prop(struct confine_report *r, const char *name, bool required)
{
	struct confine_prop *p = &r->props[r->n < CONFINE_PROPS_MAX ? r->n++ : r->n - 1];

	*p = (struct confine_prop){ .name = name, .required = required };
	return p;
}

static void __attribute__((format(printf, 4, 5)))
say(struct confine_prop *p, bool holds, const char *by, const char *fmt, ...)
{
	va_list ap;

	p->state = holds ? CONFINE_ENFORCED : CONFINE_UNENFORCED;
	snprintf(p->by, sizeof(p->by), "%s", holds ? by : "");
	va_start(ap, fmt);
	vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
	va_end(ap);
}

/* A probe's errno, as a word. */
static const char *probe_errno(int r)
{
	return r == 0 ? "allowed" : strerrorname_np(errno) ? strerrorname_np(errno) : "error";
}

/* --- the layers --------------------------------------------------------------------------- */

static int pivot_root(const char *new_root, const char *put_old)
{
	return (int)syscall(SYS_pivot_root, new_root, put_old);
}

static bool root_prepared;

/* /proc/self/fd (this process's, from the host's /proc) bound at the same
 * path in the root to be: ".." from it is the root's own empty /proc/self. */
static int proc_fds_bind(void)
{
	static const char *const dirs[] = { CONFINE_ROOT "/proc", CONFINE_ROOT "/proc/self",
					    CONFINE_ROOT "/proc/self/fd" };

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (mkdir(dirs[i], 0500) < 0)
			return -1;
	return mount("/proc/self/fd", dirs[2], NULL, MS_BIND, NULL);
}

bool confine_root_prepare(const struct confine_opts *o)
{
	if (root_prepared)
		return true;
	if (o->mode == CONFINE_OFF || !(o->spawn.ns & CLONE_NEWNS))
		return false;
	/* Nothing we mount may reach the host's mount namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("gantry-root", CONFINE_ROOT, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "size=16k,nr_inodes=8,mode=0700") < 0)
		return false;
	root_prepared = true;
	if (o->proc_fds && proc_fds_bind() < 0)
		return false;
	return true;
}

/* The prepared tmpfs as /, read-only: 0 or -1 with errno. */
static int empty_root(const struct confine_opts *o)
{
	if (!confine_root_prepare(o))
		return -1;
	if (chdir(CONFINE_ROOT) < 0 || pivot_root(".", ".") < 0 || umount2(".", MNT_DETACH) < 0 ||
	    chdir("/") < 0)
		return -1;
	return mount(NULL, "/", NULL,
		     MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void layer_mount(const struct confine_opts *o, struct confine_report *r)
{
	struct confine_prop *p = prop(r, "fs-root", true);
	int e = 0, probe;

	if (!(o->spawn.ns & CLONE_NEWNS)) {
		say(p, false, "", "no mount namespace");
		return;
	}
	if (empty_root(o) < 0)
		e = errno;
	probe = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	if (probe >= 0)
		close(probe);
	if (e)
		say(p, false, "", "empty root: %s", strerror(e));
	else
		say(p, probe < 0 && errno == ENOENT, "mount", "open /etc/passwd: %s",
		    probe_errno(probe < 0 ? -1 : 0));
	if (o->proc_fds && !e) {
		/* Our own fds through /proc/self/fd, and no other process. */
		bool own = faccessat(AT_FDCWD, "/proc/self/fd/2", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
		bool other = faccessat(AT_FDCWD, "/proc/1", F_OK, AT_SYMLINK_NOFOLLOW) == 0;

		say(prop(r, "proc-fds", true), own && !other, "mount",
		    "/proc/self/fd/2: %s, /proc/1: %s", own ? "there" : "missing",
		    other ? "there" : "absent");
	}
}

static void layer_limits(const struct confine_opts *o, struct confine_report *r)
{
	struct rlimit core = { 0, 0 }, nofile, nproc = { 0, 0 };
	struct confine_prop *p = prop(r, "rlimits", true);
	bool ok;

	/* At most what it declared, and never more than it may have now. */
	getrlimit(RLIMIT_NOFILE, &nofile);
	nofile.rlim_cur = nofile.rlim_max = MIN(nofile.rlim_max, o->nofile);
	ok = setrlimit(RLIMIT_CORE, &core) == 0 && setrlimit(RLIMIT_NOFILE, &nofile) == 0;

	/* No process of its own to start: none may be (root's own count
	 * is exempt from it; the seccomp filter refuses fork there). A
	 * worker with threads to start keeps its limit: threads count. */
	if (!o->threads)
		ok = setrlimit(RLIMIT_NPROC, &nproc) == 0 && ok;
	say(p, ok, "rlimit", "core 0, nofile %llu, nproc %s", (unsigned long long)nofile.rlim_max,
	    o->threads ? "unchanged (threads)" : "0");
}

static int capset_zero(bool keep_bind)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (keep_bind)
		d[0].effective = d[0].permitted = 1u << CAP_NET_BIND_SERVICE;
	return (int)syscall(SYS_capset, &h, d);
}

static bool caps_zero(bool keep_bind, char *what, size_t len)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2] = { 0 };
	uint32_t allowed = keep_bind ? 1u << CAP_NET_BIND_SERVICE : 0;

	if (syscall(SYS_capget, &h, d) < 0) {
		snprintf(what, len, "capget: %s", strerror(errno));
		return false;
	}
	snprintf(what, len, "eff %08x%08x prm %08x%08x inh %08x%08x", d[1].effective,
		 d[0].effective, d[1].permitted, d[0].permitted, d[1].inheritable,
		 d[0].inheritable);
	return (d[0].effective & ~allowed) == 0 && d[1].effective == 0 &&
	       (d[0].permitted & ~allowed) == 0 && d[1].permitted == 0 && d[0].inheritable == 0 &&
	       d[1].inheritable == 0;
}

static void layer_privileges(const struct confine_opts *o, struct confine_report *r)
{
	struct confine_prop *bits = prop(r, "securebits", true);
	struct confine_prop *bound = prop(r, "bounding-set", true);
	struct confine_prop *nnp = prop(r, "no-new-privs", true);
	struct confine_prop *dump = prop(r, "not-dumpable", true);
	int left = 0, got;

	prctl(PR_SET_SECUREBITS, SECBITS_LOCKED, 0, 0, 0);
	got = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
	say(bits, got >= 0 && (got & SECBITS_LOCKED) == SECBITS_LOCKED, "prctl", "securebits %#x",
	    got);
	for (int cap = 0; cap <= CAP_LAST_CAP; cap++) {
		if (o->keep_bind_cap && cap == CAP_NET_BIND_SERVICE)
			continue;
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
		left += prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	say(bound, left == 0, "prctl", "%d capabilities left in the bounding set", left);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	say(nnp, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1, "prctl", "no_new_privs %d",
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0));
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	say(dump, prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0, "prctl", "dumpable %d",
	    prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
}

/* Every filesystem right ABI abi knows. */
static uint64_t landlock_fs_rights(int abi)
{
	uint64_t fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0-12 */

	if (abi >= 2)
		fs |= LANDLOCK_ACCESS_FS_REFER;
	if (abi >= 3)
		fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LL_FS_IOCTL_DEV;
	return fs;
}

/* What a confine_dir may do beneath it: a read-only one reads; a writable
 * one anything but make device nodes and execute. */
static uint64_t landlock_dir_rights(int abi, bool ro)
{
	uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;

	if (ro)
		return read;
	return landlock_fs_rights(abi) &
	       ~(LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_MAKE_CHAR |
		 LANDLOCK_ACCESS_FS_MAKE_BLOCK | LL_FS_IOCTL_DEV);
}

static int landlock_add_dirs(const struct confine_opts *o, int rs, int abi)
{
	for (size_t i = 0; i < o->nr_dirs; i++) {
		struct landlock_path_beneath_attr pb = {
			.allowed_access = landlock_dir_rights(abi, o->dirs[i].ro),
			.parent_fd = o->dirs[i].fd,
		};

		if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
			return -1;
	}
	return 0;
}

static void layer_landlock(const struct confine_opts *o, struct confine_report *r)
{
	/* The attribute as ABI 6 lays it out; a shorter size for older ones. */
	struct {
		uint64_t fs, net, scoped;
	} attr = { 0 };
	/* Required: under `required` a kernel without it fails the start. */
	struct confine_prop *p = prop(r, "landlock", true);
	size_t size = sizeof(attr.fs);
	int abi, rs, probe;

	abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	r->landlock_abi = abi > 0 ? abi : 0;
	if (abi <= 0) {
		say(p, false, "", "no Landlock: %s", strerror(errno));
		return;
	}
	attr.fs = landlock_fs_rights(abi);
	if (abi >= 6) {
		/* Abstract sockets and signals beyond our own domain. */
		attr.scoped = LL_SCOPE_ABSTRACT | LL_SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0 || landlock_add_dirs(o, rs, abi) < 0 ||
	    syscall(SYS_landlock_restrict_self, rs, 0) < 0) {
		say(p, false, "", "ABI %d: %s", abi, strerror(errno));
		if (rs >= 0)
			close(rs);
		return;
	}
	close(rs);
	probe = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (probe >= 0)
		close(probe);
	say(p, probe < 0 && errno == EACCES, "landlock", "ABI %d, %zu rule%s; open /: %s", abi,
	    o->nr_dirs, o->nr_dirs == 1 ? "" : "s", probe_errno(probe < 0 ? -1 : 0));
}

static void layer_caps(const struct confine_opts *o, struct confine_report *r)
{
	struct confine_prop *p = prop(r, "capabilities", true);
	char what[96];
	bool ok;

	capset_zero(o->keep_bind_cap);
	ok = caps_zero(o->keep_bind_cap, what, sizeof(what));
	say(p, ok, "capset", "%s%s", what, o->keep_bind_cap ? " (net_bind_service kept)" : "");
}

/* glibc reads /proc/sys/vm/overcommit_memory once, the first time a
 * thread's own heap (an arena other than the main one) shrinks. After
 * the filter that open is refused (harmless: glibc then only drops the
 * pages) and, under GANTRY_SECCOMP=log, logged; so it happens here:
 * a thread grows a heap of its own and frees it. */
static void *shrink_a_heap(void *arg)
{
	enum { PIECES = 8, PIECE = 64 * 1024 }; /* each below the mmap threshold */
	void *p[PIECES];

	(void)arg;
	for (int i = 0; i < PIECES; i++)
		p[i] = malloc(PIECE);
	for (int i = PIECES - 1; i >= 0; i--)
		free(p[i]);
	return NULL;
}

/* What glibc and jansson open on first use, done before the layers: the
 * time zone (a log line's strftime loads it; with TZ unset it stats and
 * opens /etc/localtime every time, with TZ set only when TZ changes: we
 * log in UTC anyway), the heap's shrinking, and jansson's hash seed (read
 * from /dev/urandom by the first JSON object made; past the empty root it
 * would fall back to the time and the PID). */
void confine_prime_libc(void)
{
	pthread_t t;

	if (getenv("TZ") == NULL)
		setenv("TZ", "UTC0", 0);
	tzset();
	json_object_seed(0);
	if (pthread_create(&t, NULL, shrink_a_heap, NULL) == 0)
		pthread_join(t, NULL);
}

/* Past a fork, the child only exits. */
static int try_fork(void)
{
	pid_t pid = fork();

	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return pid > 0 ? 0 : -1;
}

static void layer_seccomp(const struct confine_opts *o, struct confine_report *r)
{
	struct confine_prop *p = prop(r, "syscall-policy", true);
	struct confine_prop *task = prop(r, "task-limit", true);
	struct confine_prop *files = prop(r, "file-open", true);
	gantry_error_t err = NULL;
	int probe, fd;

	r->seccomp_log = o->seccomp_log;
	if (o->load_filter == NULL || o->load_filter(o->filter_opaque, o->seccomp_log, &err) < 0) {
		say(p, false, "", "%s", err ? gantry_error_str(err) : "no filter for this role");
		gantry_error_free(&err);
		say(task, false, "", "no filter");
		say(files, false, "", "no filter");
		return;
	}
	if (o->seccomp_log) {
		/* Nothing is refused, and a probe would only be logged. */
		say(p, false, "", "log mode: what the list lacks is logged, not refused");
		say(task, false, "", "log mode: not probed");
		say(files, false, "", "log mode: not probed");
		return;
	}
	/* Harmless, and on no list: refused by default. */
	probe = (int)syscall(SYS_getppid) < 0 ? -1 : 0;
	say(p, probe < 0 && errno == EPERM, "seccomp", "getppid: %s", probe_errno(probe));
	probe = try_fork();
	say(task, probe < 0, "seccomp,rlimit", "fork: %s", probe_errno(probe));
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		close(fd);
	if (!o->opens_files) {
		say(files, fd < 0 && errno == EPERM, "seccomp", "open /: %s",
		    probe_errno(fd < 0 ? -1 : 0));
	} else if (fd < 0 && errno == EACCES) {
		say(files, true, "landlock", "open /: EACCES (seccomp lets the share server open)");
	} else {
		/* Its shares' files are opened by path (/proc/self/fd): only
		 * the empty root (fs-root) is between it and the rest. */
		files->required = false;
		say(files, false, "", "open /: %s; the share server opens files, in an empty root",
		    probe_errno(fd < 0 ? -1 : 0));
	}
}

/* The uid outside that our uid 0 is (/proc/self/uid_map), -1 if none. */
static long outside_uid(void)
{
	char buf[128];
	long inside = -1, outside = -1;
	int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%ld %ld", &inside, &outside) != 2 || inside != 0)
		return -1;
	return outside;
}

void confine_apply(const struct confine_opts *o, struct confine_report *r)
{
	struct confine_prop *p;
	double t[7]; /* GANTRY_BOOT_TIMING: before the layers and after each */
	long outside;

	*r = (struct confine_report){ 0 };
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Required where the role gives up root's identity in it (the VMM
	 * worker); for the others it is only the way to their namespaces. */
	p = prop(r, "user-namespace", (o->spawn.ns & CONFINE_ROOT_UNPRIVILEGED) != 0);
	if ((o->spawn.ns & CLONE_NEWUSER) && (o->spawn.ns & CONFINE_ROOT_UNPRIVILEGED)) {
		outside = outside_uid();
		say(p, outside == CONFINE_UNPRIVILEGED_UID, "namespace",
		    "its root is uid %ld outside, not the caller's root", outside);
	} else if (o->spawn.ns & CLONE_NEWUSER)
		say(p, true, "namespace", "mapped to the caller's uid");
	else if (geteuid() == 0 && o->spawn.userns_errno == 0)
		p->state = CONFINE_NA, snprintf(p->detail, sizeof(p->detail), "root: not needed");
	else
		say(p, false, "", "refused: %s", strerror(o->spawn.userns_errno));
	p = prop(r, "pid-namespace", true);
	say(p, getpid() == 1, "namespace", "getpid() = %d", (int)getpid());
	p = prop(r, "ipc-namespace", true);
	say(p, (o->spawn.ns & CLONE_NEWIPC) != 0, "namespace", "%s",
	    o->spawn.ns & CLONE_NEWIPC ? "new" : "the host's");
	if (!o->host_net) {
		/* It needs no network: an empty namespace of its own. */
		p = prop(r, "net-namespace", true);
		say(p, (o->spawn.ns & CLONE_NEWNET) != 0, "namespace", "%s",
		    o->spawn.ns & CLONE_NEWNET ? "new, empty" : "the host's");
	}
	t[0] = now_ms_frac();
	confine_prime_libc(); /* before NPROC 0 stops its thread */
	t[1] = now_ms_frac();
	layer_mount(o, r);
	t[2] = now_ms_frac();
	layer_limits(o, r);
	layer_privileges(o, r);
	t[3] = now_ms_frac();
	layer_landlock(o, r);
	t[4] = now_ms_frac();
	layer_caps(o, r);
	t[5] = now_ms_frac();
	layer_seccomp(o, r);
	t[6] = now_ms_frac();
	if (o->timing)
		log_always("confined in %.1f ms: libc %.1f, root %.1f, limits %.1f, landlock %.1f, "
			   "caps %.1f, seccomp %.1f",
			   t[6] - t[0], t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3],
			   t[5] - t[4], t[6] - t[5]);
}

const struct confine_prop *confine_missing(const struct confine_report *r)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->props[i].required && r->props[i].state != CONFINE_ENFORCED)
			return &r->props[i];
	return NULL;
}

/* What to change on this host for p to hold, or "". */
static const char *hint(const struct confine_report *r, const struct confine_prop *p)
{
	static const char *const by_userns[] = { "user-namespace", "pid-namespace",
						 "ipc-namespace", "net-namespace", "fs-root",
						 "proc-fds" };

	if (r->userns_errno) {
		for (size_t i = 0; i < ARRAY_SIZE(by_userns); i++)
			if (strcmp(p->name, by_userns[i]) == 0)
				return "; to allow user namespaces: sysctl "
				       "user.max_user_namespaces=15000 (Debian: "
				       "kernel.unprivileged_userns_clone=1), or an AppArmor "
				       "profile granting `userns,` to gantry (and no chroot: "
				       "it refuses them to root too)";
	}
	if (strcmp(p->name, "syscall-policy") == 0 || strcmp(p->name, "task-limit") == 0 ||
	    strcmp(p->name, "file-open") == 0)
		return r->seccomp_log ? "; unset " CONFINE_SECCOMP_ENV : "";
	if (strcmp(p->name, "landlock") == 0)
		return "; boot the kernel with landlock in lsm=";
	return "";
}

json_t *confine_run(struct confine_opts *o, gantry_error_t *err)
{
	const struct confine_prop *miss;
	struct confine_report r;

	if (o->mode == CONFINE_OFF)
		return NULL;
	o->seccomp_log = confine_seccomp_log();
	confine_apply(o, &r);
	r.userns_errno = o->spawn.userns_errno;
	miss = confine_missing(&r);
	if (miss && o->mode == CONFINE_REQUIRED) {
		gantry_error(err, EPERM, "process isolation is required, but `%s` does not hold (%s)%s",
			     miss->name, miss->detail, hint(&r, miss));
		return NULL;
	}
	return confine_report_json(&r, o->role, o->mode);
}

int confine_self_test(struct confine_opts *o)
{
	gantry_error_t err = NULL;
	json_t *j;
	int rc = 0;

	confine_root_prepare(o);
	j = confine_run(o, &err);
	if (j == NULL && err) {
		j = json_pack("{s:b,s:s}", "ok", false, "error", gantry_error_str(err));
		gantry_error_free(&err);
		rc = 1;
	} else if (j == NULL) {
		j = json_pack("{s:s}", "mode", "off");
	}
	json_dumpf(j, stdout, JSON_COMPACT);
	putchar('\n');
	json_decref(j);
	return rc;
}

json_t *confine_report_json(const struct confine_report *r, const char *role,
			    enum confine_mode mode)
{
	static const char *const states[] = { "n/a", "enforced", "unenforced" };
	json_t *props = json_array(), *degraded = json_array();

	for (size_t i = 0; i < r->n; i++) {
		const struct confine_prop *p = &r->props[i];

		json_array_append_new(props,
				      json_pack("{s:s,s:s,s:s,s:s,s:b}", "name", p->name, "state",
						states[p->state], "by", p->by, "detail", p->detail,
						"required", p->required));
		if (p->state == CONFINE_UNENFORCED)
			json_array_append_new(degraded, json_string(p->name));
	}
	return json_pack("{s:i,s:s,s:s,s:i,s:s,s:o,s:o}", "version", 1, "role", role, "mode",
			 confine_mode_name(mode), "landlock_abi", r->landlock_abi, "seccomp",
			 r->seccomp_log ? "log" : "enforce", "properties", props, "degraded",
			 degraded);
}
