/* A sandbox's network settings: the published-port lists every part keeps
 * (the flags of start and one-shot exec, sandbox.json, the supervisor's
 * live list), and the live changes and traffic snapshots that go through
 * a running sandbox's supervisor to its network worker. A stopped
 * sandbox's ports are edited in its sandbox.json, under its lock. */
#ifndef GANTRY_SANDBOX_NETWORK_H
#define GANTRY_SANDBOX_NETWORK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"
#include "net/portspec.h"
#include "sandbox/state.h"

struct sandbox_opts;

#define PORTS_MAX 256 /* published ports of one sandbox */

/* Parse spec (any form portspec.h takes) and append its canonical spec to
 * the NULL-terminated *v; a second forward of a bind already there (same
 * protocol, host address and host port) is an error. A zero host port
 * stays zero until ports_pick. */
int ports_add(char ***v, size_t *n, const char *spec, gantry_error_t *err);
/* Choose every zero host port in v (port_spec_pick), distinct from the
 * others', and store the spec as chosen. */
int ports_pick(char **v, size_t n, gantry_error_t *err);
/* Index of the entry with p's bind, or -1. */
ssize_t ports_find(char *const *v, size_t n, const struct port_spec *p);
/* Remove entry i, keeping the order of the rest. */
void ports_remove(char **v, size_t *n, size_t i);
/* {"spec","host_ip","host_port","guest_port","proto","ephemeral"} */
json_t *port_json(const char *spec, bool ephemeral);

/* `gantry ports publish`: forward spec on the running sandbox name now
 * (ephemeral: until it stops; else saved too), or save it for its next
 * boot when it is stopped. A zero host port is chosen first; *chosen
 * (optional) gets the canonical spec. */
int sandbox_publish(const char *name, const char *spec, bool ephemeral, char **chosen,
		    gantry_error_t *err);
/* `gantry ports unpublish`: the forward of spec's bind, which must be
 * published; ephemeral: only until the sandbox stops. */
int sandbox_unpublish(const char *name, const char *spec, bool ephemeral, gantry_error_t *err);
/* `gantry ports ls`: {"name","running","net","ports":[port_json...]}. */
int sandbox_ports_list(const char *name, json_t **out, gantry_error_t *err);
/* `gantry net traffic`: the sandbox's network-traffic.json, refreshed by
 * its worker first when it runs. A sandbox that never had traffic
 * recorded gets an empty snapshot. */
int sandbox_net_traffic(const char *name, json_t **out, gantry_error_t *err);

/* A stopped sandbox's vCPUs and memory for its next boot (checked as
 * sandbox_opts_resources does); refused while it runs, and while a save
 * of its VM (`stop -snapshot`) waits for its resume. */
int sandbox_resize(const char *name, uint64_t cpus, uint64_t mem_mib, gantry_error_t *err);
/* The vCPUs (1 to this host's, at most SANDBOX_MAX_CPUS) and memory. */
int sandbox_opts_resources(const struct sandbox_opts *o, gantry_error_t *err);
/* The resources, the network and share flags of start and one-shot exec
 * that go together, the proxy's syntax, the policy file and the shared
 * directories: what the CLI refuses as a usage error, before anything
 * else is done (before an image is pulled). */
int sandbox_opts_check(const struct sandbox_opts *o, gantry_error_t *err);
/* Each share's host directory may be shared (share_host_check). */
int shares_check(char *const *shares, size_t n, gantry_error_t *err);
/* The network and share flags of start and one-shot exec, checked, into
 * sb: the ports (not yet picked), the -net-policy file read and made
 * canonical, -allow-local-net, the proxy and the shares. */
int sandbox_opts_net(const struct sandbox_opts *o, struct sandbox *sb, gantry_error_t *err);
/* Whether sb's egress policy lets the guest reach the DNS name name: its
 * DNS would learn the name's addresses, or resolve it under a default
 * that allows; *why says why not. */
bool sandbox_net_reaches(const struct sandbox *sb, const char *name, const char **why);
/* Read and check a policy file: its canonical document. Errors are
 * "net-policy FILE: <JSON path>: why". */
int net_policy_file(const char *path, json_t **out, gantry_error_t *err);
/* The proxy variables sb's processes get (net/proxy.h), NULL with no proxy. */
char **sandbox_proxy_env(const struct sandbox *sb);

/* `gantry net-policy set|default|clear`: policy (canonical; NULL: the
 * default) and allow_local become the sandbox's: on a running one in force
 * at once (flows it denies cut) and then saved, on a stopped one saved.
 * *out (optional): {"name","running","generation","cut"}. */
int sandbox_net_policy_set(const char *name, json_t *policy, bool allow_local, json_t **out,
			   gantry_error_t *err);
/* `gantry net-policy show`: {"name","running","policy","allowLocal",
 * "default":bool, and when running "generation","learned","flows"}. */
int sandbox_net_policy_show(const char *name, json_t **out, gantry_error_t *err);

#endif
