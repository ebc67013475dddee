/* What the dashboard's keys do (tui.h): each job one call of the
 * lifecycle library, the same the CLI makes, run off the screen's thread
 * by tui.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"
#include "tui/tui.h"

static const char *const doing[] = {
	[TUI_JOB_NONE] = "nothing",	     [TUI_JOB_CREATE] = "creating",
	[TUI_JOB_START] = "starting",	     [TUI_JOB_STOP] = "stopping",
	[TUI_JOB_DELETE] = "deleting",	     [TUI_JOB_PAUSE] = "pausing",
	[TUI_JOB_UNPAUSE] = "unpausing",     [TUI_JOB_SHELL] = "a shell in",
	[TUI_JOB_ALLOW] = "allowing for",    [TUI_JOB_BLOCK] = "blocking for",
	[TUI_JOB_SHARE_ADD] = "sharing into", [TUI_JOB_SHARE_RM] = "unsharing from",
	[TUI_JOB_PUBLISH] = "publishing on", [TUI_JOB_UNPUBLISH] = "unpublishing on",
	[TUI_JOB_SECRET_ADD] = "adding a secret to",
	[TUI_JOB_SECRET_RM] = "removing a secret from",
	[TUI_JOB_RESIZE] = "resizing",
};

void tui_job_describe(const struct tui_job *j, char *buf, size_t len)
{
	const char *who = j->kind == TUI_JOB_CREATE ? j->arg : j->sandbox;
	cleanup_free char *safe = tui_cell(who);

	snprintf(buf, len, "%s %s...", doing[j->kind], safe);
}

/* "NAME [IMAGE]": a sandbox of the defaults, its image the built-in one
 * without IMAGE. */
static int create(const char *arg, char **done, gantry_error_t *err)
{
	cleanup_free char *copy = xstrdup(arg);
	char *name = strtok(copy, " "), *image = strtok(NULL, " ");
	struct sandbox_opts o;
	int r;

	if (name == NULL || strtok(NULL, " "))
		return gantry_error(err, 0, "want NAME, or NAME IMAGE");
	sandbox_opts_init(&o);
	o.name = name;
	o.image = image;
	r = sandbox_opts_check(&o, err);
	if (r == 0)
		r = sandbox_create(&o, NULL, err);
	sandbox_opts_free(&o);
	if (r == 0)
		xasprintf(done, "%s is running", name);
	return r;
}

/* "CPUS MEMORY": the next boot's size. */
static int resize(const char *name, const char *arg, char **done, gantry_error_t *err)
{
	cleanup_free char *copy = xstrdup(arg);
	char *cpus = strtok(copy, " "), *mem = strtok(NULL, " "), *end;
	struct sandbox_opts o;
	unsigned long long n;
	int r;

	if (cpus == NULL || mem == NULL || strtok(NULL, " "))
		return gantry_error(err, 0, "want CPUS MEMORY (2 1g)");
	n = strtoull(cpus, &end, 10);
	if (*end || end == cpus)
		return gantry_error(err, 0, "`%.16s` is not a number of vCPUs", cpus);
	sandbox_opts_init(&o);
	r = sandbox_opts_memory(&o, mem, err);
	if (r == 0)
		r = sandbox_resize(name, n, o.mem_mib, err);
	if (r == 0)
		xasprintf(done, "%s boots next with %llu vCPUs and %llu MiB", name, n,
			  (unsigned long long)o.mem_mib);
	sandbox_opts_free(&o);
	return r;
}

/* Allow or block a Traffic row's destination: a rule for that address,
 * protocol and port put first in the sandbox's policy (the first rule
 * that matches decides), or its DNS name added to allowDomains. */
static int judge(const struct tui_job *j, char **done, gantry_error_t *err)
{
	bool allow = j->kind == TUI_JOB_ALLOW;
	json_t *shown = NULL, *policy, *rules, *rule;
	char addr[64], proto[16], cidr[80];
	unsigned int port = 0;
	int r;

	if (sandbox_net_policy_show(j->sandbox, &shown, err) < 0)
		return -1;
	policy = json_object_get(shown, "policy");
	policy = json_is_object(policy) ? json_deep_copy(policy)
					: json_pack("{s:s,s:[]}", "default", "allow", "rules");
	if (strncmp(j->arg, "dns ", 4) == 0) {
		json_t *names = json_object_get(policy, "allowDomains");

		if (!allow) {
			json_decref(policy);
			json_decref(shown);
			return gantry_error(err, 0, "a name is blocked by leaving it out: block its "
						    "addresses on this page");
		}
		if (!json_is_array(names)) {
			names = json_array();
			json_object_set_new(policy, "allowDomains", names);
		}
		json_array_append_new(names, json_string(j->arg + 4));
	} else {
		if (sscanf(j->arg, "%63s %15s %u", addr, proto, &port) != 3) {
			json_decref(policy);
			json_decref(shown);
			return gantry_error(err, 0, "no destination on this row");
		}
		snprintf(cidr, sizeof(cidr), "%s/32", addr);
		rule = json_pack("{s:s,s:s,s:s}", "action", allow ? "allow" : "deny", "cidr", cidr,
				 "proto", proto);
		if (port && (strcmp(proto, "tcp") == 0 || strcmp(proto, "udp") == 0))
			json_object_set_new(rule, "ports", json_sprintf("%u", port));
		rules = json_object_get(policy, "rules");
		if (!json_is_array(rules)) {
			rules = json_array();
			json_object_set_new(policy, "rules", rules);
		}
		json_array_insert_new(rules, 0, rule);
	}
	r = sandbox_net_policy_set(j->sandbox, policy,
				   json_is_true(json_object_get(shown, "allowLocal")), NULL, err);
	json_decref(policy);
	json_decref(shown);
	if (r == 0)
		xasprintf(done, "%s now %s %s", j->sandbox, allow ? "allows" : "blocks", j->arg);
	return r;
}

/* The dashboard has no environment of secrets to give: a secret comes
 * from its own source. */
static const char *no_env(const char *name)
{
	(void)name;
	return NULL;
}

int tui_job_run(const struct tui_job *j, char **done, gantry_error_t *err)
{
	const char *n = j->sandbox;
	int r;

	*done = NULL;
	switch (j->kind) {
	case TUI_JOB_CREATE:
		return create(j->arg, done, err);
	case TUI_JOB_START:
		r = sandbox_resume(n, no_env, NULL, err);
		break;
	case TUI_JOB_STOP:
		r = sandbox_stop(n, err);
		break;
	case TUI_JOB_DELETE:
		r = sandbox_delete(n, false, err);
		break;
	case TUI_JOB_PAUSE:
	case TUI_JOB_UNPAUSE:
		r = sandbox_freeze(n, j->kind == TUI_JOB_PAUSE, err);
		break;
	case TUI_JOB_ALLOW:
	case TUI_JOB_BLOCK:
		return judge(j, done, err);
	case TUI_JOB_RESIZE:
		return resize(n, j->arg, done, err);
	case TUI_JOB_SHARE_ADD:
		r = sandbox_share_add(n, j->arg, false, false, NULL, err);
		break;
	case TUI_JOB_SHARE_RM:
		r = sandbox_share_rm(n, j->arg, false, false, NULL, err);
		break;
	case TUI_JOB_PUBLISH:
		r = sandbox_publish(n, j->arg, false, NULL, err);
		break;
	case TUI_JOB_UNPUBLISH:
		r = sandbox_unpublish(n, j->arg, false, err);
		break;
	case TUI_JOB_SECRET_ADD:
		r = sandbox_secret_set(n, j->arg, no_env, err);
		break;
	case TUI_JOB_SECRET_RM:
		r = sandbox_secret_rm(n, j->arg, err);
		break;
	default:
		return gantry_error(err, 0, "nothing to do");
	}
	if (r == 0)
		xasprintf(done, "%s: done (%s)", n, doing[j->kind]);
	return r;
}
