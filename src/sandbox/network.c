/* A sandbox's published ports and traffic (see network.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/files.h"
#include "common/json.h"
#include "common/text.h"
#include "common/util.h"
#include "machine/vmm.h"
#include "net/net.h"
#include "net/policy.h"
#include "net/proxy.h"
#include "share/spec.h"
#include "sandbox/ctl.h"
#include "sandbox/lifecycle.h"
#include "sandbox/network.h"

#define PORTS_PICK_TRIES 16
#define NET_CTL_WAIT_MS	 10000 /* the supervisor gives the worker 5 s */
#define TRAFFIC_FILE_MAX (4u << 20)

ssize_t ports_find(char *const *v, size_t n, const struct port_spec *p)
{
	for (size_t i = 0; i < n; i++) {
		struct port_spec q;

		if (port_spec_parse(v[i], &q, NULL) == 0 && port_spec_same_bind(&q, p))
			return (ssize_t)i;
	}
	return -1;
}

int ports_add(char ***v, size_t *n, const char *spec, gantry_error_t *err)
{
	char buf[PORT_SPEC_MAX], ip[INET_ADDRSTRLEN];
	struct port_spec p;
	ssize_t at;

	if (port_spec_parse(spec, &p, err) < 0)
		return -1;
	port_spec_format(&p, buf);
	/* Zero host ports are all different: each gets a port of its own. */
	at = p.host_port ? ports_find(*v, *n, &p) : -1;
	if (at >= 0)
		return gantry_error(err, 0, "port `%s`: %s:%u/%s is already published (as %s)",
				    spec, inet_ntop(AF_INET, &p.host_ip, ip, sizeof(ip)),
				    p.host_port, p.udp ? "udp" : "tcp", (*v)[at]);
	if (*n >= PORTS_MAX)
		return gantry_error(err, 0, "port `%s`: at most %d ports", spec, PORTS_MAX);
	*v = xrealloc(*v, (*n + 2) * sizeof(**v));
	(*v)[(*n)++] = xstrdup(buf);
	(*v)[*n] = NULL;
	return 0;
}

int ports_pick(char **v, size_t n, gantry_error_t *err)
{
	for (size_t i = 0; i < n; i++) {
		char buf[PORT_SPEC_MAX];
		struct port_spec p, want;
		int tries = 0;

		if (port_spec_parse(v[i], &want, err) < 0)
			return -1;
		if (want.host_port)
			continue;
		/* The kernel may hand out a port another entry has chosen. */
		do {
			p = want;
			if (port_spec_pick(&p, err) < 0)
				return -1;
		} while (ports_find(v, n, &p) >= 0 && ++tries < PORTS_PICK_TRIES);
		if (tries == PORTS_PICK_TRIES)
			return gantry_error(err, 0, "port `%s`: no free host port", v[i]);
		port_spec_format(&p, buf);
		free(v[i]);
		v[i] = xstrdup(buf);
	}
	return 0;
}

void ports_remove(char **v, size_t *n, size_t i)
{
	free(v[i]);
	memmove(v + i, v + i + 1, (*n - i) * sizeof(*v)); /* the NULL too */
	(*n)--;
}

json_t *port_json(const char *spec, bool ephemeral)
{
	char ip[INET_ADDRSTRLEN];
	struct port_spec p;

	if (port_spec_parse(spec, &p, NULL) < 0)
		return json_pack("{s:s,s:b}", "spec", spec, "ephemeral", ephemeral);
	inet_ntop(AF_INET, &p.host_ip, ip, sizeof(ip));
	return json_pack("{s:s,s:s,s:i,s:i,s:s,s:b}", "spec", spec, "host_ip", ip, "host_port",
			 (int)p.host_port, "guest_port", (int)p.guest_port, "proto",
			 p.udp ? "udp" : "tcp", "ephemeral", ephemeral);
}

int sandbox_opts_publish(void *opaque, const char *spec, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;

	return ports_add(&o->ports, &o->nr_ports, spec, err);
}

int sandbox_opts_share(void *opaque, const char *spec, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;
	cleanup_free char *cwd = getcwd(NULL, 0);

	return shares_add(&o->shares, &o->nr_shares, spec, cwd, err);
}

/* A tag for a -v share: its container path's last name, made of tag
 * characters, and numbered past the tags o has. */
static char *volume_tag(const struct sandbox_opts *o, const char *ctr)
{
	const char *base = strrchr(ctr, '/');
	char tag[32];
	size_t n = 0;
	char *out = NULL;

	for (base = base ? base + 1 : ctr; *base && n < 24; base++)
		tag[n++] = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-",
				  *base) ? *base : '-';
	tag[n] = '\0';
	if (n == 0 || strcmp(tag, ".") == 0 || strcmp(tag, "..") == 0)
		strcpy(tag, "vol");
	for (unsigned int i = 1;; i++) {
		free(out);
		if (i == 1)
			out = xstrdup(tag);
		else
			xasprintf(&out, "%s-%u", tag, i);
		if (shares_find(o->shares, o->nr_shares, out) < 0)
			return out;
	}
}

int sandbox_opts_volume(void *opaque, const char *spec, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;
	cleanup_free char *host = xstrdup(spec);
	char *ctr = strchr(host, ':'), *mode = NULL;
	bool ro = false;

	if (ctr == NULL || ctr == host)
		return gantry_error(err, 0, "volume `%.*s`: want HOST_PATH:CTR_PATH[:ro|rw]", 256,
				    spec);
	*ctr++ = '\0';
	mode = strchr(ctr, ':');
	if (mode) {
		*mode++ = '\0';
		if (strcmp(mode, "ro") != 0 && strcmp(mode, "rw") != 0)
			return gantry_error(err, 0, "volume `%.*s`: mode `%.*s`: want ro or rw",
					    256, spec, 16, mode);
		ro = strcmp(mode, "ro") == 0;
	}
	if (host[0] != '/' && host[0] != '.')
		return gantry_error(err, 0,
				    "volume `%.*s`: named volumes are not supported: give a host "
				    "path (/PATH or ./PATH)",
				    256, spec);
	if (ctr[0] != '/')
		return gantry_error(err, 0, "volume `%.*s`: the container path must be absolute",
				    256, spec);
	return sandbox_opts_bind(o, host, ctr, ro, err);
}

/* A path the share spec's plain form would misread: its delimiters. */
static bool spec_delims(const char *p)
{
	return strpbrk(p, ",@=") != NULL;
}

int sandbox_opts_bind(struct sandbox_opts *o, const char *host, const char *ctr, bool ro,
		      gantry_error_t *err)
{
	cleanup_free char *share = NULL, *tag = volume_tag(o, ctr);

	if (spec_delims(host) || spec_delims(ctr)) {
		cleanup_free char *h = share_b64url(host), *c = share_b64url(ctr);

		xasprintf(&share, "%s=%s@%s%s,encoding=base64url", tag, h, c, ro ? ",ro" : "");
	} else {
		xasprintf(&share, "%s=%s@%s%s", tag, host, ctr, ro ? ",ro" : "");
	}
	return sandbox_opts_share(o, share, err);
}

int sandbox_opts_memory(void *opaque, const char *size, gantry_error_t *err)
{
	struct sandbox_opts *o = opaque;
	unsigned long long v;
	uint64_t unit = 1;
	char *end;

	errno = 0;
	v = strtoull(size, &end, 10);
	if (end == size || size[0] == '-' || errno)
		return gantry_error(err, 0, "size `%.*s`: want a number, then b, k, m or g", 32,
				    size);
	switch (*end) {
	case 'g': case 'G': unit = 1ull << 30; end++; break;
	case 'm': case 'M': unit = 1ull << 20; end++; break;
	case 'k': case 'K': unit = 1ull << 10; end++; break;
	case 'b': case 'B': end++; break;
	}
	if (*end != '\0' || v > (UINT64_MAX >> 30))
		return gantry_error(err, 0, "size `%.*s`: want a number, then b, k, m or g", 32,
				    size);
	if ((v * unit) % (1ull << 20))
		return gantry_error(err, 0, "size `%.*s`: want whole MiB", 32, size);
	o->mem_mib = v * unit >> 20;
	return 0;
}

void sandbox_opts_free(struct sandbox_opts *o)
{
	if (o->secrets) {
		secret_store_free(o->secrets);
		free(o->secrets);
		o->secrets = NULL;
	}
	sandbox_process_opts_free(&o->process);
	strv_free(o->ports);
	strv_free(o->shares);
	strv_free(o->tmpfs);
	strv_free(o->sockets);
	o->ports = o->shares = o->tmpfs = o->sockets = NULL;
	o->nr_ports = o->nr_shares = o->nr_tmpfs = o->nr_sockets = 0;
	free(o->oauth_providers);
	o->oauth_providers = NULL;
}

/* The sandbox, with its lock held (*lock >= 0) when it is not running. */
static int open_net(const char *name, struct sandbox *sb, char **dir, int *lock,
		    gantry_error_t *err)
{
	if (sandbox_open_locked(name, sb, dir, lock, err) < 0)
		return -1;
	if (!sb->net)
		return gantry_error(err, 0,
				    "sandbox `%s` has no network (it was started without one)", name);
	return 0;
}

static int supervisor_request(const char *name, const char *dir, json_t *req, json_t **reply,
			      gantry_error_t *err)
{
	return sandbox_request(name, dir, req, NET_CTL_WAIT_MS, reply, err);
}

static int canonical(const char *spec, bool pick, char buf[PORT_SPEC_MAX], gantry_error_t *err)
{
	struct port_spec p;

	if (port_spec_parse(spec, &p, err) < 0)
		return gantry_error_as_usage(err);
	if (pick && port_spec_pick(&p, err) < 0)
		return -1;
	if (!pick && p.host_port == 0)
		return gantry_error_usage(err, "port `%s`: name its host port", spec);
	port_spec_format(&p, buf);
	return 0;
}

static int change_port(const char *name, const char *spec, bool publish, bool ephemeral,
		       char **chosen, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	char buf[PORT_SPEC_MAX];
	struct port_spec p;
	ssize_t at;
	int r = -1;

	if (canonical(spec, publish, buf, err) < 0 || open_net(name, &sb, &dir, &lock, err) < 0)
		goto out;
	if (lock < 0) {
		json_t *req = json_pack("{s:s,s:s,s:b}", "op",
					publish ? CTL_OP_PUBLISH : CTL_OP_UNPUBLISH, "spec", buf,
					"ephemeral", ephemeral);

		r = supervisor_request(name, dir, req, NULL, err);
		goto out;
	}
	if (ephemeral) {
		gantry_error_opt(err, "ephemeral", " is for a running sandbox: `%s` is not running",
				 name);
		gantry_error_as_conflict(err);
		goto out;
	}
	port_spec_parse(buf, &p, NULL);
	at = ports_find(sb.ports, sb.nr_ports, &p);
	if (!publish && (at < 0 || strcmp(sb.ports[at], buf) != 0)) {
		gantry_error(err, 0, "%s is not published on sandbox `%s`", buf, name);
		goto out;
	}
	if (publish)
		r = ports_add(&sb.ports, &sb.nr_ports, buf, err);
	else
		ports_remove(sb.ports, &sb.nr_ports, (size_t)at), r = 0;
	if (r == 0)
		r = sandbox_save(dir, &sb, err);
out:
	if (r == 0 && chosen)
		*chosen = xstrdup(buf);
	sandbox_free(&sb);
	return r;
}

int sandbox_publish(const char *name, const char *spec, bool ephemeral, char **chosen,
		    gantry_error_t *err)
{
	return change_port(name, spec, true, ephemeral, chosen, err);
}

int sandbox_unpublish(const char *name, const char *spec, bool ephemeral, gantry_error_t *err)
{
	return change_port(name, spec, false, ephemeral, NULL, err);
}

int sandbox_ports_list(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	json_t *ports = json_array(), *reply = NULL, *v;
	bool running;
	size_t i;
	int r = -1;

	*out = NULL;
	if (sandbox_inspect(name, &sb, &dir, err) < 0 || sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	r = sandbox_lock(dir, true, &lock, err);
	if (r < 0)
		goto out;
	r = -1;
	running = lock < 0;
	if (sb.net && running) {
		if (supervisor_request(name, dir, json_pack("{s:s}", "op", CTL_OP_PORTS), &reply,
				       err) < 0)
			goto out;
		json_array_foreach(json_object_get(reply, "ports"), i, v)
		{
			const char *spec = json_string_value(json_object_get(v, "spec"));

			if (spec)
				json_array_append_new(ports,
						      port_json(spec, json_is_true(json_object_get(
									      v, "ephemeral"))));
		}
	} else {
		for (i = 0; i < sb.nr_ports; i++)
			json_array_append_new(ports, port_json(sb.ports[i], false));
	}
	*out = json_pack("{s:s,s:b,s:b,s:O}", "name", name, "running", running, "net", sb.net,
			 "ports", ports);
	r = 0;
out:
	json_decref(ports);
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}

int sandbox_net_traffic(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL, *path = NULL, *buf = NULL;
	struct sandbox sb = { 0 };
	size_t len;
	int r = -1;

	*out = NULL;
	if (sandbox_inspect(name, &sb, &dir, err) < 0 || sandbox_refuse_oneshot(&sb, err) < 0)
		goto out;
	if (!sb.net) {
		gantry_error(err, 0, "sandbox `%s` has no network (it was started without one)",
			     name);
		goto out;
	}
	if (sandbox_is_running(dir) &&
	    supervisor_request(name, dir, json_pack("{s:s}", "op", CTL_OP_TRAFFIC), NULL, err) < 0)
		goto out;
	xasprintf(&path, "%s/%s", dir, NET_TRAFFIC_FILE);
	if (read_file_max(path, TRAFFIC_FILE_MAX, &buf, &len, err) < 0)
		goto out;
	if (buf == NULL)
		*out = json_pack("{s:[],s:[],s:{},s:i}", "destinations", "dns", "drops", "evicted", 0);
	else if ((*out = jsonh_load(buf, len, path, err)) == NULL)
		goto out;
	r = 0;
out:
	sandbox_free(&sb);
	return r;
}

/* --- the egress policy and the proxy --------------------------------------------------------- */

int net_policy_file(const char *path, json_t **out, gantry_error_t *err)
{
	cleanup_free char *buf = NULL;
	struct policy *p;
	size_t len;

	*out = NULL;
	if (read_file_max(path, POLICY_FILE_MAX, &buf, &len, err) < 0)
		return gantry_error_prefix(err, "net-policy");
	if (buf == NULL)
		return gantry_error(err, ENOENT, "net-policy `%s`", path);
	if (policy_parse(buf, len, path, &p, err) < 0)
		return gantry_error_prefix(err, "net-policy `%s`", path);
	*out = policy_to_json(p);
	policy_free(p);
	{
		cleanup_free char *doc = json_dumps(*out, JSON_COMPACT);

		if (doc == NULL || strlen(doc) > POLICY_DOC_MAX) {
			json_decref(*out);
			*out = NULL;
			return gantry_error(err, 0,
					    "net-policy `%s`: more than %d KiB once written out", path,
					    POLICY_DOC_MAX / 1024);
		}
	}
	return 0;
}

int sandbox_opts_resources(const struct sandbox_opts *o, gantry_error_t *err)
{
	long host = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t max = MIN((uint64_t)(host > 0 ? host : 1), (uint64_t)SANDBOX_MAX_CPUS);

	if (o->cpus < 1 || o->cpus > max)
		return gantry_error_opt(err, "cpus", " %llu: this host allows 1 to %llu",
					(unsigned long long)o->cpus, (unsigned long long)max);
	if (o->mem_mib < VMM_MIN_MEM_MIB || o->mem_mib > VMM_MAX_MEM_MIB)
		return gantry_error_opt(err, "mem_mib", " %llu: want %d MiB to 1 TiB",
					(unsigned long long)o->mem_mib, VMM_MIN_MEM_MIB);
	return 0;
}

int sandbox_resize(const char *name, uint64_t cpus, uint64_t mem_mib, gantry_error_t *err)
{
	struct sandbox_opts o;
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	int lock = -1, r = -1;

	sandbox_opts_init(&o);
	o.cpus = cpus;
	o.mem_mib = mem_mib;
	if (sandbox_opts_resources(&o, err) < 0)
		goto out;
	if (sandbox_open_locked(name, &sb, &dir, &lock, err) < 0)
		goto out;
	if (sb.transient)
		gantry_error(err, 0, "a one-shot exec is not resized");
	else if (lock < 0)
		gantry_error(err, 0, "it is running: stop it first (the size is its next boot's)");
	else if (sandbox_saved(dir))
		gantry_error(err, 0,
			     "its save (stop -snapshot) is of this size: resume it first, or "
			     "drop the save with gantry resume -fresh");
	else {
		sb.cpus = cpus;
		sb.mem_mib = mem_mib;
		r = sandbox_save(dir, &sb, err);
	}
out:
	if (lock >= 0)
		close(lock);
	sandbox_free(&sb);
	sandbox_opts_free(&o);
	return r < 0 ? gantry_error_prefix(err, "resize `%s`", name) : 0;
}

int sandbox_opts_check(const struct sandbox_opts *o, gantry_error_t *err)
{
	enum confine_mode mode;
	struct net_proxy proxy;

	if (sandbox_opts_resources(o, err) < 0)
		return -1;

	if (o->nr_ports && !o->net)
		return gantry_error_opt(err, "ports", " needs a network (this sandbox has none)");
	if (!o->net && (o->net_policy || o->allow_local_net || o->proxy))
		return gantry_error_opt(err,
					o->net_policy ? "net_policy"
					: o->proxy    ? "proxy"
						      : "allow_local_net",
					" needs a network (this sandbox has none)");
	if ((o->no_proxy || o->proxy_enforce) && !o->proxy)
		return gantry_error_opt(err, o->no_proxy ? "no_proxy" : "proxy_enforce",
					" needs a proxy (none is given)");
	if (o->proxy && net_proxy_parse(o->proxy, &proxy, err) < 0)
		return -1;
	if (o->no_proxy && net_no_proxy_check(o->no_proxy, err) < 0)
		return -1;
	/* start's process fields (an entrypoint "" is fine there: no command
	 * is run until a session names one). */
	if (sandbox_process_opts_check(&(struct sandbox_process_opts){ .workdir = o->process.workdir,
								       .user = o->process.user },
				       err) < 0)
		return -1;
	if (o->isolation && confine_mode_parse(o->isolation, &mode, err) < 0)
		return gantry_error_prefix_opt(err, "isolation", "%s", "");
	if (!o->isolation && confine_mode_from_env(&mode, err) < 0)
		return -1;
	/* Read now too, so that a bad file fails before any image work. */
	if (o->net_policy) {
		json_t *p;

		if (net_policy_file(o->net_policy, &p, err) < 0)
			return -1;
		json_decref(p);
	}
	return shares_check(o->shares, o->nr_shares, err);
}

int shares_check(char *const *shares, size_t n, gantry_error_t *err)
{
	for (size_t i = 0; i < n; i++) {
		struct share_spec sp;
		int r;

		if (share_spec_parse(shares[i], NULL, &sp, err) < 0)
			return -1;
		r = share_host_check(sp.host_path, NULL, err);
		if (r < 0)
			gantry_error_prefix_opt(err, "shares", " `%s`", sp.tag);
		share_spec_free(&sp);
		if (r < 0)
			return -1;
	}
	return 0;
}

bool sandbox_net_reaches(const struct sandbox *sb, const char *name, const char **why)
{
	struct policy *p = NULL;
	gantry_error_t err = NULL;
	enum policy_dns d;
	bool ok;

	if (!sb->net) {
		*why = "the sandbox has no network";
		return false;
	}
	if (sb->net_policy == NULL)
		p = policy_default(sb->allow_local_net);
	else if (policy_from_json(sb->net_policy, &p, &err) < 0) {
		gantry_error_free(&err);
		*why = "its egress policy does not read";
		return false;
	}
	d = policy_dns_name(p, name);
	ok = d == POLICY_DNS_LEARN || (d == POLICY_DNS_RESOLVE && p->default_allow);
	policy_free(p);
	*why = "the egress policy does not allow that host";
	return ok;
}

int sandbox_opts_net(const struct sandbox_opts *o, struct sandbox *sb, gantry_error_t *err)
{
	if (sandbox_opts_check(o, err) < 0)
		return -1;
	if (o->net_policy && net_policy_file(o->net_policy, &sb->net_policy, err) < 0)
		return -1;
	/* A custody login's callback listens on the host's loopback, which
	 * only the local-network wall keeps from the guest: with it down the
	 * guest could answer it with a code of its own account. */
	if (o->oauth_custody && o->net &&
	    (o->allow_local_net || json_is_true(json_object_get(sb->net_policy, "allowLocal"))))
		return gantry_error_opt(err, "oauth_custody",
					" needs the local-network wall: with it down the guest could "
					"answer the login's callback on the host's loopback");
	sb->net = o->net;
	sb->ports = strv_dup(o->ports, o->nr_ports);
	sb->nr_ports = o->nr_ports;
	sb->allow_local_net = o->allow_local_net;
	sb->proxy = o->proxy ? xstrdup(o->proxy) : NULL;
	sb->no_proxy = o->no_proxy ? xstrdup(o->no_proxy) : NULL;
	sb->proxy_enforce = o->proxy_enforce;
	if (o->isolation)
		confine_mode_parse(o->isolation, &sb->isolation, NULL);
	else
		confine_mode_from_env(&sb->isolation, NULL);
	sb->shares = strv_dup(o->shares, o->nr_shares);
	sb->nr_shares = o->nr_shares;
	sb->tmpfs = strv_dup(o->tmpfs, o->nr_tmpfs);
	sb->nr_tmpfs = o->nr_tmpfs;
	sb->sockets = strv_dup(o->sockets, o->nr_sockets);
	sb->nr_sockets = o->nr_sockets;
	sb->oauth_bridge = o->oauth_bridge;
	return 0;
}

char **sandbox_proxy_env(const struct sandbox *sb)
{
	struct net_proxy proxy;

	if (sb->proxy == NULL || net_proxy_parse(sb->proxy, &proxy, NULL) < 0)
		return NULL;
	return net_proxy_env(&proxy, sb->no_proxy);
}

int sandbox_net_policy_set(const char *name, json_t *policy, bool allow_local, json_t **out,
			   gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	json_t *reply = NULL;
	int r = -1;

	if (out)
		*out = NULL;
	if (open_net(name, &sb, &dir, &lock, err) < 0)
		goto out;
	if (lock < 0) {
		json_t *req = json_pack("{s:s,s:O?,s:b}", "op", CTL_OP_NETPOLICY_SET, "policy",
					policy, "allowLocal", allow_local);

		if (supervisor_request(name, dir, req, &reply, err) < 0)
			goto out;
		if (out)
			*out = json_pack("{s:s,s:b,s:O?,s:O?}", "name", name, "running", 1,
					 "generation", json_object_get(reply, "generation"), "cut",
					 json_object_get(reply, "cut"));
		r = 0;
		goto out;
	}
	json_decref(sb.net_policy);
	sb.net_policy = policy ? json_incref(policy) : NULL;
	sb.allow_local_net = allow_local;
	r = sandbox_save(dir, &sb, err);
	if (r == 0 && out)
		*out = json_pack("{s:s,s:b}", "name", name, "running", 0);
out:
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}

int sandbox_net_policy_show(const char *name, json_t **out, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	cleanup_close int lock = -1;
	struct sandbox sb = { 0 };
	json_t *reply = NULL;
	int r = -1;

	*out = NULL;
	if (open_net(name, &sb, &dir, &lock, err) < 0)
		goto out;
	*out = json_pack("{s:s,s:b,s:b,s:b}", "name", name, "running", lock < 0, "default",
			 sb.net_policy == NULL, "allowLocal", sb.allow_local_net);
	if (lock >= 0) {
		struct policy *p = policy_default(sb.allow_local_net);

		json_object_set_new(*out, "policy", sb.net_policy ? json_incref(sb.net_policy)
								  : policy_to_json(p));
		policy_free(p);
		r = 0;
		goto out;
	}
	if (supervisor_request(name, dir, json_pack("{s:s}", "op", CTL_OP_NETPOLICY_GET), &reply,
			       err) < 0) {
		json_decref(*out);
		*out = NULL;
		goto out;
	}
	/* What is in force: the saved policy with the proxy's rules, if any. */
	json_object_set(*out, "policy", json_object_get(reply, "policy"));
	json_object_set(*out, "generation", json_object_get(reply, "generation"));
	json_object_set(*out, "learned", json_object_get(reply, "learned"));
	json_object_set(*out, "learned_total", json_object_get(reply, "learned_total"));
	json_object_set(*out, "flows", json_object_get(reply, "flows"));
	r = 0;
out:
	json_decref(reply);
	sandbox_free(&sb);
	return r;
}
