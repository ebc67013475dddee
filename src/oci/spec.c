/* An OCI bundle's config.json, read into what a VM carries out, and that
 * turned into the lifecycle's sandbox options (oci.h).
 * The document is the caller's, so it is bounded and checked as any
 * other input: sizes, types and paths, each error naming its field. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "oci/oci.h"
#include "sandbox/lifecycle.h"

static int field_error(gantry_error_t *err, const char *field, const char *what)
{
	return gantry_error(err, 0, "config.json: `%s` %s", field, what);
}

static int string_list(json_t *obj, const char *key, const char *field, size_t max,
		       char ***out, size_t *n, gantry_error_t *err)
{
	json_t *a = json_object_get(obj, key), *v;
	size_t i;

	*out = NULL;
	*n = 0;
	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return field_error(err, field, "is not a list");
	if (json_array_size(a) > max)
		return gantry_error(err, 0, "config.json: `%s` has over %zu entries", field, max);
	*out = xzalloc((json_array_size(a) + 1) * sizeof(char *));
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return field_error(err, field, "holds something other than a string");
		(*out)[(*n)++] = xstrdup(json_string_value(v));
	}
	return 0;
}

static int u32_field(json_t *obj, const char *key, const char *field, uint32_t *out,
		     gantry_error_t *err)
{
	json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > (json_int_t)UINT32_MAX)
		return field_error(err, field, "is not a number from 0 to 4294967295");
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

static json_t *object_or_null(json_t *obj, const char *key, const char *field, gantry_error_t *err)
{
	json_t *v = json_object_get(obj, key);

	if (v && !json_is_null(v) && !json_is_object(v)) {
		field_error(err, field, "is not an object");
		return NULL;
	}
	return v && json_is_object(v) ? v : NULL;
}

json_t *oci_json_load(const char *text, size_t len, const char *what, gantry_error_t *err)
{
	static const char inf[] = "18446744073709551615";
	const size_t n = sizeof(inf) - 1;
	cleanup_free char *copy = xmalloc(len + 1);
	bool in_string = false;

	memcpy(copy, text, len);
	copy[len] = '\0';
	for (size_t i = 0; i < len; i++) {
		if (in_string) {
			if (copy[i] == '\\')
				i++;
			else if (copy[i] == '"')
				in_string = false;
		} else if (copy[i] == '"') {
			in_string = true;
		} else if (len - i >= n && memcmp(copy + i, inf, n) == 0 &&
			   (i == 0 || strchr(" \t\r\n:,[", copy[i - 1])) &&
			   (i + n == len || strchr(" \t\r\n,]}", copy[i + n]))) {
			memcpy(copy + i, "-1", 2);
			memset(copy + i + 2, ' ', n - 2);
			i += n - 1;
		}
	}
	return jsonh_load(copy, len, what, err);
}

/* A limit: a number from 0, or -1 for RLIM_INFINITY (oci_json_load's). */
static bool rlimit_value(json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < -1)
		return false;
	*out = json_integer_value(v) == -1 ? UINT64_MAX : (uint64_t)json_integer_value(v);
	return true;
}

/* process.user.additionalGids: the process's groups (none given: none). */
static int gid_list(json_t *user, struct oci_spec *s, gantry_error_t *err)
{
	json_t *a = json_object_get(user, "additionalGids"), *v;
	size_t i;

	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return field_error(err, "process.user.additionalGids", "is not a list");
	if (json_array_size(a) > PROTO_MAX_GIDS)
		return gantry_error(err, 0,
				    "config.json: `process.user.additionalGids` has over %d entries",
				    PROTO_MAX_GIDS);
	s->has_gids = true;
	s->gids = xzalloc((json_array_size(a) + 1) * sizeof(*s->gids));
	json_array_foreach(a, i, v) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > (json_int_t)UINT32_MAX)
			return field_error(err, "process.user.additionalGids",
					   "holds something other than a group id");
		s->gids[s->ngids++] = (uint32_t)json_integer_value(v);
	}
	return 0;
}

/* process.rlimits: [{type, soft, hard}], each type Linux knows, once,
 * its soft limit within its hard one. */
static int rlimit_list(json_t *p, struct oci_spec *s, gantry_error_t *err)
{
	json_t *a = json_object_get(p, "rlimits"), *v;
	uint32_t seen = 0;
	size_t i;

	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return field_error(err, "process.rlimits", "is not a list");
	if (json_array_size(a) > PROTO_MAX_RLIMITS)
		return gantry_error(err, 0, "config.json: `process.rlimits` has over %d entries",
				    PROTO_MAX_RLIMITS);
	s->has_rlimits = true;
	json_array_foreach(a, i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));
		json_t *soft = json_object_get(v, "soft"), *hard = json_object_get(v, "hard");
		struct proto_rlimit *l = &s->rlimits[s->nrlimits];
		int n = type ? proto_rlimit_number(type) : -1;

		if (n < 0)
			return gantry_error(err, 0,
					    "config.json: `process.rlimits` names an unknown resource "
					    "`%.32s`",
					    type ? type : "");
		if (seen & (1u << n))
			return gantry_error(err, 0, "config.json: `process.rlimits` names %s twice",
					    proto_rlimit_name((unsigned int)n));
		if (!rlimit_value(soft, &l->soft) || !rlimit_value(hard, &l->hard))
			return gantry_error(err, 0,
					    "config.json: `process.rlimits` %s: soft and hard are not "
					    "numbers",
					    proto_rlimit_name((unsigned int)n));
		l->resource = (uint32_t)n;
		if (l->soft > l->hard)
			return gantry_error(err, 0,
					    "config.json: `process.rlimits` %s: soft is over hard",
					    proto_rlimit_name((unsigned int)n));
		seen |= 1u << n;
		s->nrlimits++;
	}
	return 0;
}

/* process.capabilities: its five sets, each a list of names Linux knows. */
static int cap_sets(json_t *p, struct oci_spec *s, gantry_error_t *err)
{
	static const char *const sets[PROTO_CAPS_SETS] = {
		[PROTO_CAPS_BOUNDING] = "bounding",
		[PROTO_CAPS_EFFECTIVE] = "effective",
		[PROTO_CAPS_PERMITTED] = "permitted",
		[PROTO_CAPS_INHERITABLE] = "inheritable",
		[PROTO_CAPS_AMBIENT] = "ambient",
	};
	json_t *c = object_or_null(p, "capabilities", "process.capabilities", err);

	if (*err)
		return -1;
	if (c == NULL)
		return 0;
	s->has_caps = true;
	for (int set = 0; set < PROTO_CAPS_SETS; set++) {
		char **names = NULL, field[48];
		size_t n;
		int cap = 0;

		snprintf(field, sizeof(field), "process.capabilities.%s", sets[set]);
		if (string_list(c, sets[set], field, 64, &names, &n, err) < 0) {
			strv_free(names);
			return -1;
		}
		for (size_t i = 0; i < n && cap >= 0; i++) {
			cap = proto_cap_number(names[i]);
			if (cap < 0)
				gantry_error(err, 0,
					     "config.json: `%s` names an unknown capability `%.32s`",
					     field, names[i]);
			else
				s->caps[set] |= 1ULL << cap;
		}
		strv_free(names);
		if (cap < 0)
			return -1;
	}
	return 0;
}

int oci_process_parse(json_t *p, struct oci_spec *s, gantry_error_t *err)
{
	json_t *user, *t;
	if (string_list(p, "args", "process.args", OCI_ARGS_MAX, &s->args, &s->nargs, err) < 0 ||
	    string_list(p, "env", "process.env", OCI_ENV_MAX, &s->env, &s->nr_env, err) < 0)
		return -1;
	if (s->nargs == 0)
		return field_error(err, "process.args", "is empty: nothing to run");
	for (size_t i = 0; i < s->nr_env; i++)
		if (strchr(s->env[i], '=') == NULL || s->env[i][0] == '=')
			return field_error(err, "process.env", "holds an entry that is not NAME=VALUE");
	if (jsonh_string(p, "cwd", false, &s->cwd, err) < 0)
		return gantry_error_prefix(err, "config.json: process");
	if (s->cwd == NULL)
		s->cwd = xstrdup("/");
	if (s->cwd[0] != '/')
		return field_error(err, "process.cwd", "is not an absolute path");
	t = json_object_get(p, "terminal");
	if (t && !json_is_null(t) && !json_is_boolean(t))
		return field_error(err, "process.terminal", "is not true or false");
	s->terminal = json_is_true(t);
	user = object_or_null(p, "user", "process.user", err);
	if (*err)
		return -1;
	if (user && (u32_field(user, "uid", "process.user.uid", &s->uid, err) < 0 ||
		     u32_field(user, "gid", "process.user.gid", &s->gid, err) < 0 ||
		     gid_list(user, s, err) < 0))
		return -1;
	return rlimit_list(p, s, err) < 0 || cap_sets(p, s, err) < 0 ? -1 : 0;
}

static int process(json_t *j, struct oci_spec *s, gantry_error_t *err)
{
	json_t *p = object_or_null(j, "process", "process", err);

	if (*err)
		return -1;
	/* Optional until start, which then fails (the runtime spec). */
	if (p == NULL) {
		s->cwd = xstrdup("/");
		return 0;
	}
	return oci_process_parse(p, s, err);
}

static int root(json_t *j, const char *bundle, struct oci_spec *s, gantry_error_t *err)
{
	json_t *r = object_or_null(j, "root", "root", err), *ro;
	cleanup_free char *path = NULL;

	if (*err)
		return -1;
	if (r == NULL)
		return field_error(err, "root", "is missing");
	if (jsonh_string(r, "path", true, &path, err) < 0)
		return gantry_error_prefix(err, "config.json: root");
	if (*path == '\0')
		return field_error(err, "root.path", "is empty");
	ro = json_object_get(r, "readonly");
	if (ro && !json_is_null(ro) && !json_is_boolean(ro))
		return field_error(err, "root.readonly", "is not true or false");
	s->readonly = json_is_true(ro);
	if (path[0] == '/')
		s->root = steal_pointer(&path);
	else
		xasprintf(&s->root, "%s/%s", bundle, path);
	return 0;
}

static bool has_option(json_t *opts, const char *want)
{
	size_t i;
	json_t *v;

	json_array_foreach(opts, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
			return true;
	return false;
}

static bool path_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);

	return strncmp(p, dir, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Bind mounts of directories become shares; the guest makes proc, sys,
 * dev, tmpfs and the like itself (and what lies under /proc, /sys and
 * /dev: podman's /dev/shm), and a file cannot be shared (podman's
 * /etc/hosts, resolv.conf and hostname: the guest writes its own). */
/* A tmpfs mount as the lifecycle stores it (sandbox_tmpfs_parse): its
 * ro, noexec, size= (bytes, or with k, m or g) and mode= options; the
 * others are the guest's (nosuid, nodev) or mean nothing there. */
static int tmpfs_spec(const char *dst, json_t *opts, size_t i, struct oci_spec *s,
		      gantry_error_t *err)
{
	unsigned long long size = 0;
	unsigned int mode = 01777;
	struct sandbox_tmpfs t;
	json_t *v;
	size_t k;
	char *spec;

	json_array_foreach(opts, k, v) {
		const char *o = json_string_value(v);
		char *end;

		if (o && strncmp(o, "size=", 5) == 0) {
			int shift;

			errno = 0;
			size = strtoull(o + 5, &end, 10);
			shift = *end == 'g' || *end == 'G' ? 30 : *end == 'm' || *end == 'M' ? 20 :
				*end ? 10 : 0;
			/* The limit shifted down: the size shifted up could wrap. */
			if (errno || end == o + 5 || size > (1ULL << 50) >> shift ||
			    (*end && strchr("kKmMgG", *end) == NULL) || (*end && end[1]))
				return gantry_error(err, 0, "config.json: mounts[%zu]: tmpfs option "
						    "`%.32s` is not a size", i, o);
			size <<= shift;
		} else if (o && strncmp(o, "mode=", 5) == 0) {
			mode = (unsigned int)strtoul(o + 5, &end, 8);
			if (end == o + 5 || *end || mode > 07777)
				return gantry_error(err, 0, "config.json: mounts[%zu]: tmpfs option "
						    "`%.32s` is not a mode", i, o);
		}
	}
	if (s->nr_tmpfs == SANDBOX_TMPFS_MAX)
		return gantry_error(err, 0, "config.json: `mounts` has over %d tmpfs mounts",
				    SANDBOX_TMPFS_MAX);
	xasprintf(&spec, "%s%s:%llu:%o:%s", has_option(opts, "ro") ? "r" : "",
		  has_option(opts, "noexec") ? "x" : has_option(opts, "ro") ? "" : "-",
		  (size + 1023) / 1024, mode, dst);
	if (sandbox_tmpfs_parse(spec, &t, err) < 0) {
		free(spec);
		return gantry_error_prefix(err, "config.json: mounts[%zu]", i);
	}
	s->tmpfs = xrealloc(s->tmpfs, (s->nr_tmpfs + 2) * sizeof(*s->tmpfs));
	s->tmpfs[s->nr_tmpfs++] = spec;
	s->tmpfs[s->nr_tmpfs] = NULL;
	return 0;
}

static int mounts(json_t *j, struct oci_spec *s, gantry_error_t *err)
{
	json_t *a = json_object_get(j, "mounts"), *m;
	size_t i;

	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return field_error(err, "mounts", "is not a list");
	if (json_array_size(a) > OCI_MOUNTS_MAX)
		return gantry_error(err, 0, "config.json: `mounts` has over %d entries",
				    OCI_MOUNTS_MAX);
	s->binds = xzalloc((json_array_size(a) + 1) * sizeof(*s->binds));
	json_array_foreach(a, i, m) {
		cleanup_free char *dst = NULL, *src = NULL, *type = NULL;
		json_t *opts;
		struct stat st;

		if (!json_is_object(m))
			return field_error(err, "mounts", "holds something other than an object");
		if (jsonh_string(m, "destination", true, &dst, err) < 0 ||
		    jsonh_string(m, "source", false, &src, err) < 0 ||
		    jsonh_string(m, "type", false, &type, err) < 0)
			return gantry_error_prefix(err, "config.json: mounts[%zu]", i);
		if (dst[0] != '/')
			return gantry_error(err, 0,
					    "config.json: mounts[%zu].destination is not an "
					    "absolute path",
					    i);
		opts = json_object_get(m, "options");
		if (opts && !json_is_null(opts) && !json_is_array(opts))
			return gantry_error(err, 0, "config.json: mounts[%zu].options is not a list",
					    i);
		/* The guest's own trees: podman binds its /dev/shm, say. */
		if (path_under(dst, "/proc") || path_under(dst, "/sys") || path_under(dst, "/dev")) {
			s->skipped++;
			continue;
		}
		if (type && strcmp(type, "tmpfs") == 0) {
			if (tmpfs_spec(dst, opts, i, s, err) < 0)
				return -1;
			continue;
		}
		if (!((type && strcmp(type, "bind") == 0) ||
		      (opts && (has_option(opts, "bind") || has_option(opts, "rbind")))) ||
		    src == NULL || src[0] != '/' || stat(src, &st) < 0 || !S_ISDIR(st.st_mode)) {
			s->skipped++;
			continue;
		}
		s->binds[s->nr_binds++] = (struct oci_bind){
			.source = steal_pointer(&src),
			.destination = steal_pointer(&dst),
			.ro = opts && has_option(opts, "ro"),
		};
	}
	return 0;
}

/* An annotation's number, when it is set. */
static int annotation_u64(const struct oci_spec *s, const char *key, uint64_t max, uint64_t *out,
			  gantry_error_t *err)
{
	json_t *v = json_object_get(s->annotations, key);

	if (v == NULL)
		return 0;
	if (!json_is_string(v) || parse_u64(json_string_value(v), max, out) < 0 || *out == 0)
		return gantry_error(err, 0, "config.json: annotation `%s` is not a number from 1 to "
					    "%llu",
				    key, (unsigned long long)max);
	return 0;
}

/* linux.resources: the memory limit is the VM's RAM, a CPU quota its
 * vCPUs (rounded up); the annotations io.gantry.cpus and io.gantry.mem_mib
 * win over both. */
static int resources(json_t *j, struct oci_spec *s, gantry_error_t *err)
{
	json_t *lx = object_or_null(j, "linux", "linux", err), *res = NULL, *mem, *cpu;

	if (*err)
		return -1;
	if (lx)
		res = object_or_null(lx, "resources", "linux.resources", err);
	if (*err)
		return -1;
	if (res && (mem = object_or_null(res, "memory", "linux.resources.memory", err))) {
		json_t *limit = json_object_get(mem, "limit");

		if (json_is_integer(limit) && json_integer_value(limit) > 0)
			s->mem_mib = ((uint64_t)json_integer_value(limit) + MiB - 1) / MiB;
	}
	if (*err)
		return -1;
	if (res && (cpu = object_or_null(res, "cpu", "linux.resources.cpu", err))) {
		json_t *quota = json_object_get(cpu, "quota"), *period = json_object_get(cpu, "period");

		if (json_is_integer(quota) && json_integer_value(quota) > 0 &&
		    json_is_integer(period) && json_integer_value(period) > 0) {
			uint64_t q = (uint64_t)json_integer_value(quota),
				 p = (uint64_t)json_integer_value(period);

			s->cpus = q / p + (q % p != 0);
		}
	}
	if (*err)
		return -1;
	if (annotation_u64(s, OCI_ANNOT_CPUS, 1024, &s->cpus, err) < 0 ||
	    annotation_u64(s, OCI_ANNOT_MEM, 1u << 20, &s->mem_mib, err) < 0)
		return -1;
	return 0;
}

/* linux.namespaces: only the network one changes what a VM does. */
static int namespaces(json_t *j, struct oci_spec *s, gantry_error_t *err)
{
	json_t *lx = json_object_get(j, "linux"), *a, *ns;
	size_t i;

	a = json_is_object(lx) ? json_object_get(lx, "namespaces") : NULL;
	if (a == NULL || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return field_error(err, "linux.namespaces", "is not a list");
	json_array_foreach(a, i, ns) {
		cleanup_free char *type = NULL, *path = NULL;

		if (!json_is_object(ns))
			return field_error(err, "linux.namespaces",
					   "holds something other than an object");
		if (jsonh_string(ns, "type", true, &type, err) < 0 ||
		    jsonh_string(ns, "path", false, &path, err) < 0)
			return gantry_error_prefix(err, "config.json: linux.namespaces[%zu]", i);
		if (strcmp(type, "network") != 0)
			continue;
		if (s->netns)
			return field_error(err, "linux.namespaces", "names the network one twice");
		s->netns = true;
		if (path && *path) {
			if (path[0] != '/')
				return field_error(err, "linux.namespaces",
						   "has a network path that is not absolute");
			s->netns_path = steal_pointer(&path);
		}
	}
	return 0;
}

int oci_spec_parse(const char *text, size_t len, const char *bundle, struct oci_spec *s,
		   gantry_error_t *err)
{
	json_t *j, *an;
	int r = -1;

	memset(s, 0, sizeof(*s));
	s->annotations = json_object();
	j = oci_json_load(text, len, "config.json", err);
	if (j == NULL) {
		oci_spec_free(s);
		return -1;
	}
	if (!json_is_object(j)) {
		gantry_error(err, 0, "config.json: not a JSON object");
		goto out;
	}
	an = object_or_null(j, "annotations", "annotations", err);
	if (*err)
		goto out;
	if (an)
		json_object_update(s->annotations, an);
	if (process(j, s, err) < 0 || root(j, bundle, s, err) < 0 || mounts(j, s, err) < 0 ||
	    resources(j, s, err) < 0 || namespaces(j, s, err) < 0 ||
	    jsonh_string(j, "hostname", false, &s->hostname, err) < 0)
		goto out;
	r = 0;
out:
	json_decref(j);
	if (r < 0)
		oci_spec_free(s);
	return r;
}

int oci_spec_load(const char *bundle, struct oci_spec *s, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL;
	size_t len;

	memset(s, 0, sizeof(*s));
	xasprintf(&path, "%s/config.json", bundle);
	if (read_file_max(path, OCI_CONFIG_MAX, &text, &len, err) < 0)
		return -1;
	if (text == NULL)
		return gantry_error(err, ENOENT, "the bundle `%s` has no config.json", bundle);
	return oci_spec_parse(text, len, bundle, s, err);
}

void oci_spec_free(struct oci_spec *s)
{
	strv_free(s->args);
	strv_free(s->env);
	free(s->cwd);
	free(s->gids);
	strv_free(s->tmpfs);
	free(s->root);
	free(s->hostname);
	free(s->netns_path);
	for (size_t i = 0; i < s->nr_binds; i++) {
		free(s->binds[i].source);
		free(s->binds[i].destination);
	}
	free(s->binds);
	json_decref(s->annotations);
	memset(s, 0, sizeof(*s));
}

/* The annotation io.gantry.publish: ports of the VM published in the
 * network namespace it runs in (a pod's), on every address there, so
 * what podman's or a CNI plugin's forwarding sends to the container's
 * address reaches the guest. "80", "8080:80", "53/udp", or a whole
 * -p spec, comma-separated. */
static void publish(const struct oci_spec *s, struct sandbox_opts *o, gantry_error_t *err)
{
	const char *v = json_string_value(json_object_get(s->annotations, OCI_ANNOT_PUBLISH));
	cleanup_free char *copy = v ? xstrdup(v) : NULL;
	char *save = NULL;

	if (v && !o->net) {
		gantry_error(err, 0, "annotation `%s`: the container has no network",
			     OCI_ANNOT_PUBLISH);
		return;
	}
	for (char *p = copy ? strtok_r(copy, ",", &save) : NULL; p && !*err;
	     p = strtok_r(NULL, ",", &save)) {
		cleanup_free char *spec = NULL;
		const char *colon = strchr(p, ':');

		while (*p == ' ')
			p++;
		if (colon == NULL) {
			/* "80" or "53/udp": the same port */
			size_t n = strcspn(p, "/");

			xasprintf(&spec, "0.0.0.0:%.*s:%s", (int)n, p, p);
		} else if (strchr(colon + 1, ':') == NULL) {
			xasprintf(&spec, "0.0.0.0:%s", p);
		} else {
			spec = xstrdup(p);
		}
		if (sandbox_opts_publish(o, spec, err) < 0)
			gantry_error_prefix(err, "annotation `%s`", OCI_ANNOT_PUBLISH);
	}
}

void oci_sandbox_opts(const struct oci_spec *s, const char *id, struct sandbox_opts *o,
		      gantry_error_t *err)
{
	sandbox_opts_init(o);
	o->name = id;
	o->root = s->root;
	o->root_readonly = s->readonly;
	o->hostname = s->hostname && *s->hostname ? s->hostname : NULL;
	o->writable = false;
	/* A network namespace of its own without a path is an empty one
	 * (podman's --network none): the VM gets no network either. */
	if (s->netns && s->netns_path == NULL)
		o->net = false;
	if (s->cpus)
		o->cpus = s->cpus;
	if (s->mem_mib)
		o->mem_mib = s->mem_mib;
	publish(s, o, err);
	for (size_t i = 0; i < s->nr_binds && !*err; i++)
		sandbox_opts_bind(o, s->binds[i].source, s->binds[i].destination, s->binds[i].ro,
				  err);
	o->tmpfs = strv_dup(s->tmpfs, s->nr_tmpfs);
	o->nr_tmpfs = s->nr_tmpfs;
}

bool oci_id_valid(const char *id)
{
	return sandbox_name_valid(id) && id[0] != '.';
}

int oci_signal_parse(const char *s)
{
	uint64_t n;

	if (parse_u64(s, 64, &n) == 0)
		return n > 0 && n < NSIG ? (int)n : 0;
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int i = 1; i < NSIG; i++) {
		const char *name = sigabbrev_np(i);

		if (name && strcasecmp(s, name) == 0)
			return i;
	}
	return 0;
}
