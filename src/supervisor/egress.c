/* The supervisor's side of the egress worker (sandbox/egressworker.h):
 * the injected secrets' values as they are at start and after each live
 * change, the bound hosts the egress policy lets through as it changes,
 * and the worker's events into the audit. */
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/network.h"
#include "supervisor/supervisor_priv.h"
#include "worker/worker.h"

void sup_egress_bindings(struct sup *s)
{
	gantry_error_t err = NULL;

	if (s->m.egress.pid < 0)
		return;
	if (egress_worker_bindings(&s->m.egress, &s->secrets, &err) < 0) {
		log_warn("%s: injected secrets are withheld", gantry_error_str(err));
		sup_audit(s, "withhold", "source", NULL, NULL, "%s", gantry_error_str(err));
		gantry_error_free(&err);
	}
}

void sup_egress_tick(struct sup *s, uint64_t now, uint64_t *wake)
{
	if (sup_egress_fd(s) < 0)
		return;
	if (s->egress_next == 0)
		s->egress_next = now + SUP_EGRESS_REFRESH_MS;
	if (now >= s->egress_next) {
		/* A file or command source past its ttl is read again now. */
		sup_egress_bindings(s);
		s->egress_next = now + SUP_EGRESS_REFRESH_MS;
	}
	*wake = MIN(*wake, s->egress_next);
}

void sup_egress_allowed(struct sup *s)
{
	gantry_error_t err = NULL;
	char **ok;
	size_t n = 0;

	if (s->m.egress.pid < 0)
		return;
	ok = xzalloc((s->m.nr_inject + 1) * sizeof(*ok));
	for (size_t i = 0; i < s->m.nr_inject; i++) {
		const char *why = NULL;

		if (sandbox_net_reaches(&s->sb, s->m.inject_hosts[i], &why))
			ok[n++] = s->m.inject_hosts[i];
	}
	if (egress_worker_allowed(&s->m.egress, ok, s->sb.allow_local_net, &err) < 0) {
		log_warn("%s", gantry_error_str(err));
		gantry_error_free(&err);
	}
	free(ok);
}

bool sup_egress_covers(struct sup *s, const struct secret_spec *sp, gantry_error_t *err)
{
	for (size_t k = 0; sp->inject && k < sp->nr_hosts; k++) {
		bool found = false;

		for (size_t i = 0; i < s->m.nr_inject && !found; i++)
			found = strcmp(s->m.inject_hosts[i], sp->hosts[k]) == 0;
		if (!found) {
			gantry_error(err, 0,
				     "secret `%s`: %s is not among the hosts this sandbox's egress "
				     "worker took at start: restart the sandbox to inject there",
				     sp->name, sp->hosts[k]);
			return false;
		}
	}
	return true;
}

int sup_egress_fd(const struct sup *s)
{
	return s->m.egress.pid > 0 ? s->m.egress.chan : -1;
}

void sup_egress_event(struct sup *s)
{
	json_t *j;
	bool eof = false;

	while ((j = egress_worker_recv(&s->m.egress, &eof))) {
		const char *kind = json_string_value(json_object_get(j, "kind"));
		const char *decision = json_string_value(json_object_get(j, "decision"));
		const char *secret = json_string_value(json_object_get(j, "secret"));
		const char *host = json_string_value(json_object_get(j, "host"));
		const char *reason = json_string_value(json_object_get(j, "reason"));

		if (kind && decision)
			sup_audit_guest(s, kind, decision,
					secret && secret_name_valid(secret, strlen(secret)) ? secret
											    : NULL,
					host, "%s", reason ? reason : "");
		json_decref(j);
	}
	if (eof) {
		int status;

		worker_reap(&s->m.egress.pid, &status);
		machine_worker_gone(&s->m, "egress", "its channel closed",
				    "injected secrets are no longer injected");
		sup_audit(s, "worker", "exited", NULL, NULL,
			  "the egress worker: injected secrets are no longer injected");
		close(s->m.egress.chan);
		s->m.egress.chan = -1;
	}
}
