/* The host checks of `gantry doctor` (see hostcheck.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/assets.h"
#include "common/files.h"
#include "common/settings.h"
#include "common/util.h"
#include "image/lazylib.h"
#include "net/slirp.h"
#include "sandbox/hostcheck.h"
#include "sandbox/rwlayer.h"
#include "vmm/vm.h"

#define DISK_WARN_MIB 2048 /* an image or two and a sandbox's disk */
#define DISK_FAIL_MIB 256

struct checks {
	struct host_check *c;
	size_t n, max;
};

static struct host_check *add(struct checks *cs, const char *name)
{
	static struct host_check spare;

	if (cs->n == cs->max)
		return memset(&spare, 0, sizeof(spare)); /* past max: not kept */
	cs->c[cs->n] = (struct host_check){ .name = name };
	return &cs->c[cs->n++];
}

static void say(struct host_check *c, enum host_status s, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void say(struct host_check *c, enum host_status s, const char *fix, const char *fmt, ...)
{
	va_list ap;

	c->status = s;
	va_start(ap, fmt);
	vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
	va_end(ap);
	snprintf(c->fix, sizeof(c->fix), "%s", fix ? fix : "");
}

/* The first CPU's flags from /proc/cpuinfo as " flag flag ... " (each
 * word between spaces, for strstr); "" when they cannot be read. */
static void cpu_flags(char *out, size_t cap)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[8192], *colon;

	out[0] = '\0';
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0 || (colon = strchr(line, ':')) == NULL)
			continue;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(out, cap, "%s ", colon + 1);
		break;
	}
	fclose(f);
}

static bool module(const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "/sys/module/%s", name);
	return access(path, F_OK) == 0;
}

static void check_arch(struct checks *cs)
{
	struct host_check *c = add(cs, "arch");
	struct utsname u;

	if (uname(&u) < 0)
		say(c, HOST_FAIL, NULL, "uname: %s", strerror(errno));
	else if (strcmp(u.machine, "x86_64") != 0)
		say(c, HOST_FAIL, "run Gantry on an x86-64 host",
		    "%s: Gantry's VMM boots x86-64 guests with x86-64 KVM", u.machine);
	else
		say(c, HOST_OK, NULL, "x86_64, Linux %s", u.release);
}

static void check_kvm(struct checks *cs)
{
	struct host_check *c = add(cs, "kvm");
	const char *dev = vm_kvm_device();
	char flags[8192];
	bool vmx, svm, nested;
	const char *kind = module("kvm_intel") ? "Intel VT-x (kvm_intel)" :
			   module("kvm_amd")   ? "AMD-V (kvm_amd)" :
			   module("kvm_pvm")   ? "PVM (kvm_pvm)" :
						 NULL;
	gantry_error_t err = NULL;

	cpu_flags(flags, sizeof(flags));
	vmx = strstr(flags, " vmx ") != NULL;
	svm = strstr(flags, " svm ") != NULL;
	nested = strstr(flags, " hypervisor ") != NULL;
	if (vm_kvm_usable(&err) < 0) {
		say(c, HOST_FAIL,
		    vmx || svm ? "load kvm_intel or kvm_amd in place of kvm_pvm" :
				 "use a host with VT-x or AMD-V (in a cloud, an instance type "
				 "with nested virtualization)",
		    "%s is PVM, which boots only PVM-enabled guest kernels", dev);
		goto out;
	}
	if (vm_kvm_check(&err) < 0) {
		int e = access(dev, F_OK) < 0 ? errno : err->status;

		if (e == ENOENT)
			say(c, HOST_FAIL,
			    vmx || svm ? "load the KVM module: modprobe kvm_intel (or kvm_amd)" :
					 "enable VT-x or AMD-V in the firmware, or in a cloud pick an "
					 "instance type with nested virtualization",
			    "%s does not exist%s", dev,
			    vmx || svm ? "" : "; the CPU shows no vmx or svm");
		else if (e == EACCES || e == EPERM)
			say(c, HOST_FAIL, "add your user to group kvm (usermod -aG kvm USER), or run as root",
			    "%s: %s", dev, strerror(e));
		else if (e)
			say(c, HOST_FAIL, NULL, "%s: %s", dev, strerror(e));
		else /* it opened: an API or a capability it lacks */
			say(c, HOST_FAIL, "update the host kernel", "%s", gantry_error_str(err));
		goto out;
	}
	say(c, HOST_OK, NULL, "%s: %s%s", dev, kind ? kind : "KVM",
	    nested ? ", nested (this host is itself a VM)" : "");
out:
	gantry_error_free(&err);
}

/* Whether a child can make a user namespace; errno's value if not. */
static int userns_errno(void)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) == 0 ? 0 : (errno & 0xff));
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
		return EIO;
	return WEXITSTATUS(status);
}

static void check_userns(struct checks *cs)
{
	struct host_check *c = add(cs, "userns");
	int e = userns_errno();

	if (e == 0)
		say(c, HOST_OK, NULL, "available");
	else
		say(c, geteuid() == 0 ? HOST_WARN : HOST_FAIL,
		    "sysctl user.max_user_namespaces=15000 (on Ubuntu also "
		    "kernel.apparmor_restrict_unprivileged_userns=0)",
		    "cannot make one (%s): %s", strerror(e),
		    geteuid() == 0 ? "root's workers run without, as root" :
				     "a user's workers need one to confine themselves");
}

static void check_landlock(struct checks *cs)
{
	struct host_check *c = add(cs, "landlock");
	int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
			       LANDLOCK_CREATE_RULESET_VERSION);

	if (abi > 0)
		say(c, HOST_OK, NULL, "ABI %d", abi);
	else
		say(c, HOST_WARN,
		    "use a kernel with CONFIG_SECURITY_LANDLOCK and landlock in its lsm= list",
		    "none (%s): workers confine their files without it", strerror(errno));
}

static void check_seccomp(struct checks *cs)
{
	struct host_check *c = add(cs, "seccomp");

	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0)
		say(c, HOST_OK, NULL, "filters available");
	else
		say(c, HOST_WARN, "use a kernel with CONFIG_SECCOMP_FILTER",
		    "none (%s): workers run without system call filters", strerror(errno));
}

static void check_cgroup(struct checks *cs)
{
	struct host_check *c = add(cs, "cgroup");
	struct statfs f;

	if (statfs("/sys/fs/cgroup", &f) < 0)
		say(c, HOST_WARN, "mount cgroup2 on /sys/fs/cgroup", "/sys/fs/cgroup: %s",
		    strerror(errno));
	else if (f.f_type == CGROUP2_SUPER_MAGIC)
		say(c, HOST_OK, NULL, "v2 (unified)");
	else
		say(c, HOST_OK, NULL, "v1 or hybrid");
}

/* Free space at dir, or at its nearest ancestor that exists; *where
 * gets which one. */
static int free_mib(const char *dir, uint64_t *mib, char **where)
{
	char *p = xstrdup(dir), *slash;
	struct statvfs v;

	while (statvfs(p, &v) < 0) {
		slash = strrchr(p, '/');
		if (errno != ENOENT || slash == NULL) {
			free(p);
			return -1;
		}
		slash[slash == p] = '\0'; /* "/a" goes to "/" */
	}
	*mib = (uint64_t)v.f_bavail * v.f_frsize >> 20;
	*where = p;
	return 0;
}

static void check_disk(struct checks *cs, const char *name, const char *dir, const char *env)
{
	struct host_check *c = add(cs, name);
	cleanup_free char *fix = NULL, *at = NULL;
	uint64_t mib;

	xasprintf(&fix, "free space there, or set %s to a directory on a bigger disk", env);
	if (free_mib(dir, &mib, &at) < 0) {
		say(c, HOST_FAIL, fix, "%s: %s", dir, strerror(errno));
		return;
	}
	say(c, mib < DISK_FAIL_MIB ? HOST_FAIL : mib < DISK_WARN_MIB ? HOST_WARN : HOST_OK,
	    mib < DISK_WARN_MIB ? fix : NULL, "%s%s: %llu MiB free", dir,
	    strcmp(at, dir) == 0 ? "" : " (not made yet)", (unsigned long long)mib);
}

static void check_assets(struct checks *cs)
{
	static const char *const names[] = { ASSET_KERNEL, ASSET_SYSROOT, ASSET_DEFAULT_IMAGE };
	struct host_check *c = add(cs, "assets");
	cleanup_free char *path = NULL;
	gantry_error_t err = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		free(path);
		path = NULL;
		if (assets_path(names[i], &path, &err) < 0) {
			say(c, HOST_FAIL,
			    "build them with `make assets`, install with `make install`, or set "
			    "GANTRY_ASSETS",
			    "%s", gantry_error_str(err));
			gantry_error_free(&err);
			return;
		}
	}
	/* path: the last one's; its directory holds them all */
	*strrchr(path, '/') = '\0';
	say(c, HOST_OK, NULL, "%s", path);
}

static void check_libs(struct checks *cs)
{
	static const struct {
		int (*load)(gantry_error_t *err);
		const char *why;
	} libs[] = {
		{ nat_lib_load, "the network" },
		{ lazy_archive, "images" },
		{ lazy_curl, "registry pulls" },
		{ lazy_crypto, "image digests" },
	};
	struct host_check *c = add(cs, "libraries");
	gantry_error_t err = NULL;

	for (size_t i = 0; i < ARRAY_SIZE(libs); i++) {
		if (libs[i].load(&err) < 0) {
			say(c, HOST_FAIL, "install the Debian package it names",
			    "for %s: %s", libs[i].why, gantry_error_str(err));
			gantry_error_free(&err);
			return;
		}
	}
	say(c, HOST_OK, NULL, "libslirp, libarchive, libcurl and libcrypto load");
}

static void check_mke2fs(struct checks *cs)
{
	struct host_check *c = add(cs, "mke2fs");
	const char *path = rwlayer_mke2fs();
	cleanup_free char *found = path[0] == '/' ? xstrdup(path) : path_find(path);

	if (found)
		say(c, HOST_OK, NULL, "%s", found);
	else
		say(c, HOST_FAIL, "apt-get install e2fsprogs",
		    "not found: a sandbox's disk cannot be made");
}

size_t host_checks(struct host_check *out, size_t max)
{
	struct checks cs = { .c = out, .max = max };
	cleanup_free char *home = NULL;
	const char *env = gantry_setting("GANTRY_IMAGES");
	gantry_error_t err = NULL;

	check_arch(&cs);
	check_kvm(&cs);
	check_userns(&cs);
	check_landlock(&cs);
	check_seccomp(&cs);
	check_cgroup(&cs);
	if (gantry_home(&home, &err) < 0) {
		say(add(&cs, "disk"), HOST_FAIL, NULL, "%s", gantry_error_str(err));
		gantry_error_free(&err);
	} else {
		check_disk(&cs, "disk", home, "GANTRY_HOME");
		if (env && *env) /* else under GANTRY_HOME */
			check_disk(&cs, "disk-images", env, "GANTRY_IMAGES");
	}
	check_assets(&cs);
	check_libs(&cs);
	check_mke2fs(&cs);
	return cs.n;
}

bool host_checks_failed(const struct host_check *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c[i].status == HOST_FAIL)
			return true;
	return false;
}

const char *host_status_name(enum host_status s)
{
	return s == HOST_OK ? "ok" : s == HOST_WARN ? "warn" : "fail";
}

json_t *host_checks_json(const struct host_check *c, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(a, json_pack("{s:s,s:s,s:s,s:s?}", "name", c[i].name, "status",
						   host_status_name(c[i].status), "detail",
						   c[i].detail, "fix", c[i].fix[0] ? c[i].fix : NULL));
	}
	return json_pack("{s:b,s:o}", "ok", !host_checks_failed(c, n), "checks", a);
}
