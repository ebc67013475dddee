/* The OCI runtime spec (config.json) for one EXEC: the process as the host
 * described it, the assembled root, the usual pseudo-filesystem mounts, the
 * generated resolv.conf, hosts and hostname (net.c) bound read-only, the
 * host's shares (shares.h) bound from the virtio-fs hub, and pid, ipc, uts
 * and mount namespaces (the network is the VM's). A small JSON writer is
 * all it takes; gantry-init links no JSON library. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "guest/guest.h"

/* Docker's default capability set: root in the container may own files,
 * bind low ports and change its ids, but not administer the VM. */
static const char *const caps[] = {
	"CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	   "CAP_FOWNER",
	"CAP_MKNOD",   "CAP_NET_RAW",	   "CAP_SETGID",	   "CAP_SETUID",
	"CAP_SETFCAP", "CAP_SETPCAP",	   "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	"CAP_KILL",    "CAP_AUDIT_WRITE",
};

struct spec_mount {
	const char *dest, *type, *source, *options;
};

/* Only filesystems our kernel has (kernel/microvm.config). */
static const struct spec_mount mounts[] = {
	{ "/proc", "proc", "proc", "nosuid,noexec,nodev" },
	{ "/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k" },
	{ "/dev/pts", "devpts", "devpts",
	  "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5" },
	{ "/dev/shm", "tmpfs", "shm", "nosuid,noexec,nodev,mode=1777,size=65536k" },
	{ "/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev" },
	{ "/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro" },
	{ "/sys/fs/cgroup", "cgroup", "cgroup", "nosuid,noexec,nodev,relatime,ro" },
	{ "/tmp", "tmpfs", "tmpfs", "nosuid,nodev,mode=1777" },
};

static const char *const masked[] = {
	"/proc/acpi",	    "/proc/kcore",	 "/proc/keys",	  "/proc/latency_stats",
	"/proc/timer_list", "/proc/sched_debug", "/sys/firmware", "/proc/scsi",
};

static const char *const readonly[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (*p < 0x20)
				fprintf(f, "\\u%04x", *p);
			else
				fputc(*p, f);
		}
	}
	fputc('"', f);
}

static void json_strv(FILE *f, const char *const *v, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		json_str(f, v[i]);
	}
	fputc(']', f);
}

/* "a,b,c" as a JSON array. */
static void json_csv(FILE *f, const char *csv)
{
	const char *p = csv;

	fputc('[', f);
	while (*p) {
		size_t n = strcspn(p, ",");

		if (p != csv)
			fputc(',', f);
		fprintf(f, "\"%.*s\"", (int)n, p);
		p += n + (p[n] == ',');
	}
	fputc(']', f);
}

static bool env_has(const struct proto_exec *e, const char *name)
{
	size_t n = strlen(name);

	for (uint32_t i = 0; i < e->envc; i++)
		if (strncmp(e->env[i], name, n) == 0 && e->env[i][n] == '=')
			return true;
	return false;
}

/* The host's sets (PROTO_EXEC_CAPS: an OCI config.json's), else Docker's
 * default set as bounding, effective and permitted. */
static void write_caps(FILE *f, const struct proto_exec *e)
{
	static const char *const sets[PROTO_CAPS_SETS] = {
		[PROTO_CAPS_BOUNDING] = "bounding",   [PROTO_CAPS_EFFECTIVE] = "effective",
		[PROTO_CAPS_PERMITTED] = "permitted", [PROTO_CAPS_INHERITABLE] = "inheritable",
		[PROTO_CAPS_AMBIENT] = "ambient",
	};

	fputs(",\"capabilities\":{", f);
	for (int set = 0; set < PROTO_CAPS_SETS; set++) {
		const char *name;
		bool first = true;

		if (!(e->flags & PROTO_EXEC_CAPS)) {
			if (set > PROTO_CAPS_PERMITTED)
				break;
			fprintf(f, "%s\"%s\":", set ? "," : "", sets[set]);
			json_strv(f, caps, sizeof(caps) / sizeof(caps[0]));
			continue;
		}
		fprintf(f, "%s\"%s\":[", set ? "," : "", sets[set]);
		for (unsigned int c = 0; c <= PROTO_MAX_CAP; c++)
			if ((e->caps[set] & (1ULL << c)) && (name = proto_cap_name(c))) {
				fprintf(f, "%s\"%s\"", first ? "" : ",", name);
				first = false;
			}
		fputc(']', f);
	}
	fputc('}', f);
}

/* The host's limits (PROTO_EXEC_RLIMITS), with the guest's open-file
 * limit where they do not name one. */
static void write_rlimits(FILE *f, const struct guest_config *cfg, const struct proto_exec *e)
{
	bool nofile = false;

	fputs(",\"rlimits\":[", f);
	for (uint32_t i = 0; (e->flags & PROTO_EXEC_RLIMITS) && i < e->nrlimits; i++) {
		const struct proto_rlimit *l = &e->rlimits[i];

		fprintf(f, "%s{\"type\":\"%s\",\"hard\":%llu,\"soft\":%llu}", i ? "," : "",
			proto_rlimit_name(l->resource), (unsigned long long)l->hard,
			(unsigned long long)l->soft);
		nofile = nofile || l->resource == RLIMIT_NOFILE;
	}
	if (!nofile)
		fprintf(f, "%s{\"type\":\"RLIMIT_NOFILE\",\"hard\":%lu,\"soft\":%lu}",
			(e->flags & PROTO_EXEC_RLIMITS) && e->nrlimits ? "," : "", cfg->nofile,
			cfg->nofile);
	fputs("],", f);
}

/* The OCI process object: config.json's "process", or crun exec's --process. */
static void write_process(FILE *f, const struct guest_config *cfg, const struct proto_exec *e)
{
	bool tty = e->flags & PROTO_EXEC_TTY;

	fprintf(f, "{\"terminal\":%s,", tty ? "true" : "false");
	if (tty && e->rows && e->cols)
		fprintf(f, "\"consoleSize\":{\"height\":%u,\"width\":%u},", e->rows, e->cols);
	fprintf(f, "\"user\":{\"uid\":%u,\"gid\":%u", e->uid, e->gid);
	if (e->ngids) {
		fputs(",\"additionalGids\":[", f);
		for (uint32_t i = 0; i < e->ngids; i++)
			fprintf(f, "%s%u", i ? "," : "", e->gids[i]);
		fputc(']', f);
	}
	fputs("},\"args\":", f);
	json_strv(f, (const char *const *)e->argv, e->argc);
	fputs(",\"env\":[", f);
	for (uint32_t i = 0; i < e->envc; i++) {
		if (i)
			fputc(',', f);
		json_str(f, e->env[i]);
	}
	/* What docker adds when the image and the user did not say. */
	if (!env_has(e, "PATH"))
		fprintf(f,
			"%s\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"",
			e->envc ? "," : "");
	if (tty && !env_has(e, "TERM"))
		fputs(",\"TERM=xterm\"", f);
	for (size_t i = 0; cfg->ca && i < trust_env_count(); i++)
		if (!env_has(e, trust_env_name(i)))
			fprintf(f, ",\"%s=%s\"", trust_env_name(i), trust_env_value(i));
	fputs("],\"cwd\":", f);
	json_str(f, e->cwd && *e->cwd ? e->cwd : "/");
	write_caps(f, e);
	write_rlimits(f, cfg, e);
	fputs("\"noNewPrivileges\":false}", f);
}

static void write_linux(FILE *f)
{
	fputs("\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},"
	      "{\"type\":\"uts\"},{\"type\":\"mount\"}],\"maskedPaths\":",
	      f);
	json_strv(f, masked, sizeof(masked) / sizeof(masked[0]));
	fputs(",\"readonlyPaths\":", f);
	json_strv(f, readonly, sizeof(readonly) / sizeof(readonly[0]));
	fputc('}', f);
}

/* resolv.conf, hosts and hostname as net.c wrote them: read-only, so that
 * the names the VM's network relies on stay what the host said. */
static void write_etc_binds(FILE *f, const struct guest_config *cfg)
{
	char dest[64], source[GUEST_PATH_MAX];
	const char *name;

	if (cfg->etc_dir == NULL)
		return;
	for (size_t i = 0; (name = net_etc_file(i)) != NULL; i++) {
		snprintf(dest, sizeof(dest), "/etc/%s", name);
		if (guest_pathf(source, sizeof(source), "%s/%s", cfg->etc_dir, name) < 0)
			continue;
		fputs(",{\"destination\":", f);
		json_str(f, dest);
		fputs(",\"type\":\"bind\",\"source\":", f);
		json_str(f, source);
		fputs(",\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\",\"noexec\"]}", f);
	}
}

static void bind_ro(FILE *f, const char *dest, const char *dir, const char *name)
{
	char source[GUEST_PATH_MAX];

	if (guest_pathf(source, sizeof(source), "%s/%s", dir, name) < 0)
		return;
	fputs(",{\"destination\":", f);
	json_str(f, dest);
	fputs(",\"type\":\"bind\",\"source\":", f);
	json_str(f, source);
	fputs(",\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\",\"noexec\"]}", f);
}

/* The egress CA (trust.c), alone and in a bundle, the bundle over the
 * image's own where it has one. */
static void write_trust_binds(FILE *f, const struct guest_config *cfg)
{
	if (cfg->ca == NULL || cfg->etc_dir == NULL)
		return;
	bind_ro(f, TRUST_CA, cfg->etc_dir, "gantry-ca.pem");
	bind_ro(f, TRUST_BUNDLE, cfg->etc_dir, "gantry-ca-bundle.crt");
	if (cfg->image_bundle)
		bind_ro(f, "/etc/ssl/certs/ca-certificates.crt", cfg->etc_dir,
			"gantry-ca-bundle.crt");
}

/* The container's own tmpfs mounts (an OCI config.json's), after the
 * standard ones and before the shares. */
static void write_tmpfs(FILE *f, const struct guest_config *cfg)
{
	for (size_t i = 0; cfg->tmpfs && i < cfg->tmpfs->n; i++) {
		const struct tmpfs_mount *t = &cfg->tmpfs->v[i];

		fputs(",{\"destination\":", f);
		json_str(f, t->path);
		fprintf(f, ",\"type\":\"tmpfs\",\"source\":\"tmpfs\",\"options\":[\"nosuid\","
			   "\"nodev\",\"%s\",%s\"mode=%o\"",
			t->ro ? "ro" : "rw", t->noexec ? "\"noexec\"," : "", t->mode);
		if (t->size_kib)
			fprintf(f, ",\"size=%lluk\"", t->size_kib);
		fputs("]}", f);
	}
}

/* The relayed host sockets (sockets.c), after the shares that hold their
 * paths. */
static void write_socket_binds(FILE *f, const struct guest_config *cfg)
{
	char source[sizeof(SOCKETS_DIR) + 24];

	for (size_t i = 0; cfg->sockets && i < cfg->sockets->n; i++) {
		snprintf(source, sizeof(source), "%s/%zu", SOCKETS_DIR, i);
		fputs(",{\"destination\":", f);
		json_str(f, cfg->sockets->v[i]);
		fputs(",\"type\":\"bind\",\"source\":", f);
		json_str(f, source);
		fputs(",\"options\":[\"bind\",\"nosuid\",\"nodev\"]}", f);
	}
	if (cfg->mcpfs)
		fputs(",{\"destination\":\"" PROTO_MCP_FS_SOCKET "\",\"type\":\"bind\",\"source\":\"" MCPFS_LISTEN
		      "\",\"options\":[\"bind\",\"nosuid\",\"nodev\"]}",
		      f);
}

/* The host's shares, last so that one over /tmp or /etc/hosts wins; crun
 * makes a missing mountpoint. */
static void write_share_binds(FILE *f, const struct guest_config *cfg)
{
	char source[sizeof(SHARES_MOUNT_DIR) + SHARE_TAG_MAX + 1];

	if (cfg->shares == NULL)
		return;
	for (size_t i = 0; i < cfg->shares->n; i++) {
		const struct share *s = &cfg->shares->v[i];

		snprintf(source, sizeof(source), "%s/%s", SHARES_MOUNT_DIR, s->tag);
		fputs(",{\"destination\":", f);
		json_str(f, s->path);
		fputs(",\"type\":\"bind\",\"source\":", f);
		json_str(f, source);
		fprintf(f, ",\"options\":[\"rbind\",\"nosuid\",\"nodev\",\"%s\"]}",
			s->ro ? "ro" : "rw");
	}
}

static FILE *spec_create(const char *path, char **why)
{
	FILE *f = NULL;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || (f = fdopen(fd, "w")) == NULL) {
		if (fd >= 0)
			close(fd);
		if (asprintf(why, "create %s: %s", path, strerror(errno)) < 0)
			*why = NULL;
	}
	return f;
}

static int spec_close(FILE *f, const char *path, char **why)
{
	if (fflush(f) != 0 || ferror(f)) {
		fclose(f);
		if (asprintf(why, "write %s: %s", path, strerror(errno)) < 0)
			*why = NULL;
		return -1;
	}
	fclose(f);
	return 0;
}

int spec_write_process(const struct guest_config *cfg, const char *path, const struct proto_exec *e,
		       char **why)
{
	FILE *f = spec_create(path, why);

	if (f == NULL)
		return -1;
	write_process(f, cfg, e);
	fputc('\n', f);
	return spec_close(f, path, why);
}

int spec_write(const struct guest_config *cfg, const char *bundle, const struct proto_exec *e,
	       bool pause, char **why)
{
	char path[GUEST_PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/config.json", bundle);
	f = spec_create(path, why);
	if (f == NULL)
		return -1;
	fputs("{\"ociVersion\":\"1.0.2\",\"process\":", f);
	write_process(f, cfg, e);
	fputs(",\"root\":{\"path\":", f);
	json_str(f, cfg->rootfs);
	fprintf(f, ",\"readonly\":%s},\"hostname\":", cfg->readonly ? "true" : "false");
	json_str(f, cfg->hostname);
	fputs(",\"mounts\":[", f);
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		fprintf(f,
			"%s{\"destination\":\"%s\",\"type\":\"%s\",\"source\":\"%s\",\"options\":",
			i ? "," : "", mounts[i].dest, mounts[i].type, mounts[i].source);
		json_csv(f, mounts[i].options);
		fputc('}', f);
	}
	/* The pause process is gantry-init itself, bound into the container's
	 * own /dev tmpfs so that nothing shows in the container root. */
	if (pause)
		fprintf(f,
			",{\"destination\":\"%s\",\"type\":\"bind\",\"source\":\"%s\","
			"\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\"]}",
			GUEST_PAUSE_PATH, cfg->self);
	fprintf(f,
		",{\"destination\":\"%s\",\"type\":\"bind\",\"source\":\"%s\","
		"\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\"]}",
		GUEST_HELPER_PATH, cfg->self);
	write_etc_binds(f, cfg);
	write_trust_binds(f, cfg);
	write_tmpfs(f, cfg);
	write_share_binds(f, cfg);
	write_socket_binds(f, cfg);
	fputs("],", f);
	write_linux(f);
	fputs("}\n", f);
	return spec_close(f, path, why);
}
