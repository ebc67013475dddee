/* The learned-address table of net/policy.h: addresses from DNS answers
 * to allowDomains names, each with the names it answered and their
 * expiries. Asked per guest frame, so lookups are a hash and a short probe;
 * bounded at POLICY_LEARNED_MAX addresses of POLICY_LEARNED_NAMES names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "net/policy.h"

/* A dense array of entries found through an open-addressing index twice
 * its size: lookups per frame are a hash and a short probe, and memory is
 * fixed at learned_new but for the names themselves. */
#define LEARNED_SLOTS (2 * POLICY_LEARNED_MAX)

struct learned_name {
	char *name;
	uint64_t expires_ms;
};

struct learned_entry {
	uint32_t ip;
	size_t nr_names;
	struct learned_name names[POLICY_LEARNED_NAMES];
};

struct learned {
	size_t count;
	struct learned_entry entry[POLICY_LEARNED_MAX];
	uint16_t slot[LEARNED_SLOTS]; /* entry index + 1; 0: empty */
};

static size_t slot_of(uint32_t ip)
{
	return (size_t)((ip * 2654435761u) >> 19) & (LEARNED_SLOTS - 1);
}

/* The slot holding ip, or the empty one where it would go. */
static size_t learned_slot(const struct learned *l, uint32_t ip)
{
	size_t s = slot_of(ip);

	while (l->slot[s] != 0 && l->entry[l->slot[s] - 1].ip != ip)
		s = (s + 1) & (LEARNED_SLOTS - 1);
	return s;
}

static struct learned_entry *learned_find(const struct learned *l, uint32_t ip)
{
	size_t s = learned_slot(l, ip);

	return l->slot[s] ? (struct learned_entry *)&l->entry[l->slot[s] - 1] : NULL;
}

struct learned *learned_new(void)
{
	return xzalloc(sizeof(struct learned));
}

static void entry_clear(struct learned_entry *e)
{
	for (size_t i = 0; i < e->nr_names; i++)
		free(e->names[i].name);
	e->nr_names = 0;
}

void learned_free(struct learned *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->count; i++)
		entry_clear(&l->entry[i]);
	free(l);
}

/* Remove entry idx: its slot is emptied with backward shift (no
 * tombstones to pile up), and the last entry moves into its place. */
static void learned_remove(struct learned *l, size_t idx)
{
	size_t hole = learned_slot(l, l->entry[idx].ip), s = hole, last = l->count - 1;

	entry_clear(&l->entry[idx]);
	l->slot[hole] = 0;
	for (;;) {
		size_t home;

		s = (s + 1) & (LEARNED_SLOTS - 1);
		if (l->slot[s] == 0)
			break;
		home = slot_of(l->entry[l->slot[s] - 1].ip);
		/* Move it back unless its home lies cyclically in (hole, s]. */
		if (((s - home) & (LEARNED_SLOTS - 1)) >= ((s - hole) & (LEARNED_SLOTS - 1))) {
			l->slot[hole] = l->slot[s];
			l->slot[s] = 0;
			hole = s;
		}
	}
	if (idx != last) {
		l->entry[idx] = l->entry[last];
		l->slot[learned_slot(l, l->entry[idx].ip)] = (uint16_t)(idx + 1);
	}
	memset(&l->entry[last], 0, sizeof(l->entry[last]));
	l->count--;
}

static uint64_t entry_expiry(const struct learned_entry *e)
{
	uint64_t latest = 0;

	for (size_t i = 0; i < e->nr_names; i++)
		latest = MAX(latest, e->names[i].expires_ms);
	return latest;
}

static void learned_evict(struct learned *l)
{
	size_t victim = 0;
	uint64_t soonest = UINT64_MAX;

	for (size_t i = 0; i < l->count; i++) {
		uint64_t e = entry_expiry(&l->entry[i]);

		if (e < soonest) {
			soonest = e;
			victim = i;
		}
	}
	learned_remove(l, victim);
}

void learned_add(struct learned *l, uint32_t ip, const char *name, uint32_t ttl_s, uint64_t now_ms)
{
	uint64_t ttl = ttl_s == 0 ? POLICY_TTL_ZERO : MIN(ttl_s, (uint32_t)POLICY_TTL_CAP);
	uint64_t expires = now_ms + ttl * 1000;
	struct learned_entry *e = learned_find(l, ip);
	struct learned_name *slot;

	if (e == NULL) {
		if (l->count == POLICY_LEARNED_MAX)
			learned_evict(l);
		e = &l->entry[l->count];
		e->ip = ip;
		e->nr_names = 0;
		l->slot[learned_slot(l, ip)] = (uint16_t)(++l->count);
	}
	for (size_t i = 0; i < e->nr_names; i++) {
		if (strcmp(e->names[i].name, name) == 0) {
			e->names[i].expires_ms = expires;
			return;
		}
	}
	if (e->nr_names < POLICY_LEARNED_NAMES) {
		slot = &e->names[e->nr_names++];
	} else {
		slot = &e->names[0];
		for (size_t i = 1; i < e->nr_names; i++)
			if (e->names[i].expires_ms < slot->expires_ms)
				slot = &e->names[i];
		free(slot->name);
	}
	slot->name = xstrdup(name);
	slot->expires_ms = expires;
}

const char *learned_name(const struct learned *l, uint32_t ip, uint64_t now_ms)
{
	const struct learned_entry *e = learned_find(l, ip);

	for (size_t i = 0; e != NULL && i < e->nr_names; i++)
		if (e->names[i].expires_ms > now_ms)
			return e->names[i].name;
	return NULL;
}

bool learned_has_name(const struct learned *l, uint32_t ip, const char *name, uint64_t now_ms)
{
	const struct learned_entry *e = learned_find(l, ip);

	for (size_t i = 0; e != NULL && i < e->nr_names; i++)
		if (e->names[i].expires_ms > now_ms && strcasecmp(e->names[i].name, name) == 0)
			return true;
	return false;
}

bool learned_has(const struct learned *l, uint32_t ip, uint64_t now_ms)
{
	return learned_name(l, ip, now_ms) != NULL;
}

void learned_retain(struct learned *l, const struct policy *p, uint64_t now_ms)
{
	/* Backwards: learned_remove moves the last entry, already seen, here. */
	for (size_t i = l->count; i-- > 0;) {
		struct learned_entry *e = &l->entry[i];
		size_t kept = 0;

		for (size_t k = 0; k < e->nr_names; k++) {
			if (e->names[k].expires_ms > now_ms &&
			    policy_dns_name(p, e->names[k].name) == POLICY_DNS_LEARN)
				e->names[kept++] = e->names[k];
			else
				free(e->names[k].name);
		}
		e->nr_names = kept;
		if (kept == 0)
			learned_remove(l, i);
	}
}

size_t learned_count(const struct learned *l)
{
	return l->count;
}

static int cmp_entry_ip(const void *a, const void *b)
{
	const struct learned_entry *x = *(const struct learned_entry *const *)a;
	const struct learned_entry *y = *(const struct learned_entry *const *)b;

	return x->ip < y->ip ? -1 : x->ip > y->ip;
}

json_t *learned_json(const struct learned *l, uint64_t now_ms)
{
	cleanup_free const struct learned_entry **sorted =
		xmalloc((l->count ? l->count : 1) * sizeof(*sorted));
	json_t *arr = json_array();
	char ip[16];

	for (size_t i = 0; i < l->count; i++)
		sorted[i] = &l->entry[i];
	qsort(sorted, l->count, sizeof(*sorted), cmp_entry_ip);
	for (size_t i = 0; i < l->count; i++) {
		const struct learned_entry *e = sorted[i];
		json_t *names = json_array(), *o;
		uint64_t latest = 0;

		for (size_t k = 0; k < e->nr_names; k++) {
			if (e->names[k].expires_ms <= now_ms)
				continue;
			json_array_append_new(names, json_string(e->names[k].name));
			latest = MAX(latest, e->names[k].expires_ms);
		}
		if (json_array_size(names) == 0) {
			json_decref(names);
			continue;
		}
		snprintf(ip, sizeof(ip), "%u.%u.%u.%u", e->ip >> 24, (e->ip >> 16) & 0xff,
			 (e->ip >> 8) & 0xff, e->ip & 0xff);
		o = json_object();
		json_object_set_new(o, "addr", json_string(ip));
		json_object_set_new(o, "names", names);
		json_object_set_new(o, "expires_in_s",
				    json_integer((json_int_t)((latest - now_ms + 999) / 1000)));
		json_array_append_new(arr, o);
	}
	return arr;
}
