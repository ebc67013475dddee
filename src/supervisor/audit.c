/* A sandbox's security events (see supervisor_priv.h): the last
 * SUP_AUDIT_EVENTS of them in a ring (and as many of those a guest can
 * cause in a ring of their own), each mirrored to the supervisor's
 * log as it happens and kept in audit.json (at most once a second, and at
 * the end) for `gantry audit` on a stopped sandbox. An event names secrets,
 * hosts and peers, never a value. One repeated back to back is counted on
 * the event before, so a guest that repeats itself cannot push the rest
 * out of the ring. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/files.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "sandbox/state.h"
#include "supervisor/supervisor_priv.h"

#define AUDIT_SAVE_MS 1000

static void copy_field(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src ? src : "");
	text_sanitize(dst, 0);
}

static bool same_event(const struct audit_event *a, const struct audit_event *b)
{
	return strcmp(a->kind, b->kind) == 0 && strcmp(a->decision, b->decision) == 0 &&
	       strcmp(a->secret, b->secret) == 0 && strcmp(a->host, b->host) == 0 &&
	       strcmp(a->reason, b->reason) == 0;
}

static void record(struct sup *s, struct audit_ring *ring, const char *kind, const char *decision,
		   const char *secret, const char *host, const char *fmt, va_list ap)
{
	struct sup_audit *a = &s->audit;
	struct audit_event e = { .count = 1 };
	char reason[sizeof(e.reason)] = "";

	if (fmt)
		vsnprintf(reason, sizeof(reason), fmt, ap);
	e.time = time(NULL);
	copy_field(e.kind, sizeof(e.kind), kind);
	copy_field(e.decision, sizeof(e.decision), decision);
	copy_field(e.secret, sizeof(e.secret), secret);
	copy_field(e.host, sizeof(e.host), host);
	copy_field(e.reason, sizeof(e.reason), reason);
	if (ring->n) {
		struct audit_event *last = &ring->ev[(ring->head + ring->n - 1) % SUP_AUDIT_EVENTS];

		if (same_event(last, &e)) {
			last->count++;
			last->time = e.time;
			a->dirty = true;
			return;
		}
	}
	log_info("audit: %s %s%s%s%s%s%s%s", e.kind, e.decision, e.secret[0] ? " secret " : "",
		 e.secret, e.host[0] ? " host " : "", e.host, e.reason[0] ? ": " : "", e.reason);
	e.seq = ++a->seq;
	if (ring->n == SUP_AUDIT_EVENTS)
		ring->head = (ring->head + 1) % SUP_AUDIT_EVENTS;
	else
		ring->n++;
	ring->ev[(ring->head + ring->n - 1) % SUP_AUDIT_EVENTS] = e;
	a->dirty = true;
}

void sup_audit(struct sup *s, const char *kind, const char *decision, const char *secret,
	       const char *host, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record(s, &s->audit.host, kind, decision, secret, host, fmt, ap);
	va_end(ap);
}

void sup_audit_guest(struct sup *s, const char *kind, const char *decision, const char *secret,
		     const char *host, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	record(s, &s->audit.guest, kind, decision, secret, host, fmt, ap);
	va_end(ap);
}

static json_t *event_json(const struct audit_event *e)
{
	char when[32];
	struct tm tm;
	json_t *o;

	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&e->time, &tm));
	o = json_pack("{s:s,s:s,s:s}", "time", when, "kind", e->kind, "decision", e->decision);
	if (e->secret[0])
		json_object_set_new(o, "secret", json_string(e->secret));
	if (e->host[0])
		json_object_set_new(o, "host", json_string(e->host));
	if (e->reason[0])
		json_object_set_new(o, "reason", json_string(e->reason));
	if (e->count > 1)
		json_object_set_new(o, "count", json_integer(e->count));
	return o;
}

json_t *sup_audit_json(const struct sup *s)
{
	const struct audit_ring *h = &s->audit.host, *g = &s->audit.guest;
	json_t *v = json_array();
	size_t i = 0, k = 0;

	/* The two rings merged in the order the events came. */
	while (i < h->n || k < g->n) {
		const struct audit_event *a =
			i < h->n ? &h->ev[(h->head + i) % SUP_AUDIT_EVENTS] : NULL;
		const struct audit_event *b =
			k < g->n ? &g->ev[(g->head + k) % SUP_AUDIT_EVENTS] : NULL;

		if (b == NULL || (a && a->seq < b->seq)) {
			json_array_append_new(v, event_json(a));
			i++;
		} else {
			json_array_append_new(v, event_json(b));
			k++;
		}
	}
	return v;
}

void sup_audit_save(struct sup *s)
{
	json_t *j;
	char *text;

	if (!s->audit.dirty)
		return;
	j = json_pack("{s:o}", "events", sup_audit_json(s));
	text = json_dumps(j, JSON_INDENT(2) | JSON_ENSURE_ASCII);
	json_decref(j);
	if (text == NULL || write_file_atomic(SANDBOX_AUDIT, text, strlen(text), 0600, NULL) < 0)
		log_warn("cannot write %s", SANDBOX_AUDIT);
	free(text);
	s->audit.dirty = false;
	s->audit.saved_at = now_ms();
}

void sup_audit_tick(struct sup *s, uint64_t now, uint64_t *wake)
{
	if (!s->audit.dirty)
		return;
	if (now >= s->audit.saved_at + AUDIT_SAVE_MS)
		sup_audit_save(s);
	else
		*wake = MIN(*wake, s->audit.saved_at + AUDIT_SAVE_MS);
}
