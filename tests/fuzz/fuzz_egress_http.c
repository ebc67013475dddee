/* libFuzzer target for the egress proxy's request rewriter
 * (egress/http.c). Input: four bytes seeding where the stream is split,
 * then the guest's stream. It is fed whole and in random pieces, with and
 * without a secret whose format adds a header; the two feedings agree
 * (status, output, events; on a refusal, one output a prefix of the
 * other), and a call given little room adds at most one step past it.
 * Without an inject event the output is the input, and without a
 * placeholder or "basic" in the input (and no format) there is none; a foreign secret's
 * value (handed to the rewriter, which must not read it) and an unfit
 * value never appear unless the input had them; a value bound to
 * X-Api-Key appears only on such header lines; events name bound or
 * foreign secrets and headers of token characters, cut short. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"
#include "egress/http.h"

#include "check.h"

#define STREAM_MAX (256 * 1024)

#define V_TOKEN	  "REAL-TOKEN-VALUE"
#define V_APIKEY  "REAL-APIKEY-VALUE"
#define V_BEARER  "REAL-BEARER-VALUE"
#define V_UNFIT	  "bad\r\nX-Evil: 1"
#define V_FOREIGN "FOREIGN-REAL-VALUE"

#define BINDING(n, ph, v, hdr, fmt)                                                                \
	{                                                                                          \
		.name = n, .placeholder = ph, .value = (const uint8_t *)v,                         \
		.value_len = sizeof(v) - 1, .header = hdr, .format = fmt                           \
	}

static const struct egress_binding plain[] = {
	BINDING("TOKEN", "gantry-ph-token-0001", V_TOKEN, NULL, NULL),
	BINDING("APIKEY", "gantry-ph-apikey-001", V_APIKEY, "X-Api-Key", NULL),
	BINDING("BEARER", "gantry-ph-bearer-001", V_BEARER, "Authorization", NULL),
	BINDING("UNFIT", "gantry-ph-unfit-0001", V_UNFIT, NULL, NULL),
};
static const struct egress_binding formatted[] = {
	BINDING("TOKEN", "gantry-ph-token-0001", V_TOKEN, NULL, NULL),
	BINDING("APIKEY", "gantry-ph-apikey-001", V_APIKEY, "X-Api-Key", NULL),
	BINDING("BEARER", "gantry-ph-bearer-001", V_BEARER, "Authorization", "Bearer %s"),
	BINDING("UNFIT", "gantry-ph-unfit-0001", V_UNFIT, "X-Unfit", "%s"),
};
static const struct egress_binding foreign[] = {
	BINDING("FOREIGN", "gantry-ph-foreign-01", V_FOREIGN, NULL, NULL),
};

struct run {
	enum egress_http_status status;
	struct egress_buf out, events;
	size_t injects;
	bool in_head;
};

static void on_event(void *opaque, enum egress_event_kind kind, const char *name,
		     const char *header)
{
	struct run *r = opaque;
	size_t n = strlen(header);

	check(kind <= EGRESS_EV_UNFIT);
	check(strcmp(name, "TOKEN") == 0 || strcmp(name, "APIKEY") == 0 ||
	      strcmp(name, "BEARER") == 0 || strcmp(name, "UNFIT") == 0 ||
	      strcmp(name, "FOREIGN") == 0);
	check((kind == EGRESS_EV_FOREIGN) == (strcmp(name, "FOREIGN") == 0));
	check(kind != EGRESS_EV_INJECT || strcmp(name, "UNFIT") != 0);
	check(n >= 1 && n <= EGRESS_HTTP_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		check(strchr("!#$%&'*+-.^_`|~", header[i]) ||
		      (header[i] >= '0' && header[i] <= '9') ||
		      (header[i] >= 'a' && header[i] <= 'z') ||
		      (header[i] >= 'A' && header[i] <= 'Z'));
	r->injects += kind == EGRESS_EV_INJECT;
	egress_buf_append(&r->events, &kind, 1);
	egress_buf_append(&r->events, name, strlen(name) + 1);
	egress_buf_append(&r->events, header, n + 1);
}

/* Feed the stream whole (seed 0) or in pieces from seed, some calls with
 * little room: what a call leaves is fed on by the next. */
static void feed(struct run *r, const uint8_t *in, size_t len, const struct egress_bindings *b,
		 uint32_t seed)
{
	struct egress_http *h = NULL;
	gantry_error_t err = NULL;
	size_t n, used, room, was;

	memset(r, 0, sizeof(*r));
	check(egress_http_new(&h, &err) == 0);
	for (size_t i = 0; i < len; i += used) {
		n = len - i;
		room = SIZE_MAX;
		if (seed) {
			seed ^= seed << 13;
			seed ^= seed >> 17;
			seed ^= seed << 5;
			n = MIN(n, (size_t)(seed % 8 == 0 ? seed % 4096 : seed % 16) + 1);
			if (seed % 3 == 0)
				room = seed % 64 + 1;
		}
		was = r->out.len;
		r->status = egress_http_feed(h, in + i, n, &used, b, &r->out, room, on_event, r);
		check(r->status <= EGRESS_HTTP_METHOD);
		check(used <= n);
		if (r->status != EGRESS_HTTP_OK) {
			used = n; /* the rest is fed too: it adds nothing */
			continue;
		}
		/* Past room, one step: a head, or the bytes taken. */
		check(used > 0);
		if (room == SIZE_MAX)
			check(used == n);
		else
			check(r->out.len - was <
			      room + MAX((size_t)EGRESS_HTTP_HEAD_OUT_MAX, used));
	}
	r->in_head = egress_http_in_head(h);
	egress_http_free(h);
}

static void done(struct run *r)
{
	egress_buf_wipe_free(&r->out);
	egress_buf_wipe_free(&r->events);
}

static bool has(const uint8_t *p, size_t n, const char *s)
{
	return n && memmem(p, n, s, strlen(s)) != NULL;
}

static bool has_case(const uint8_t *p, size_t n, const char *s)
{
	size_t k = strlen(s);

	for (size_t i = 0; i + k <= n; i++)
		if (strncasecmp((const char *)p + i, s, k) == 0)
			return true;
	return false;
}

/* Every occurrence of v in out is on a line starting "X-Api-Key:". */
static void only_in_api_key(const uint8_t *out, size_t n)
{
	const uint8_t *p = out, *v, *line;

	if (n == 0)
		return;
	while ((v = memmem(p, n - (size_t)(p - out), V_APIKEY, sizeof(V_APIKEY) - 1))) {
		for (line = v; line > out && line[-1] != '\n';)
			line--;
		check((size_t)(v - line) >= 10 &&
		      strncasecmp((const char *)line, "x-api-key:", 10) == 0);
		p = v + 1;
	}
}

static void same(const struct run *a, const struct run *b)
{
	check(a->status == b->status);
	if (a->status == EGRESS_HTTP_OK) {
		check(a->out.len == b->out.len);
		check(a->out.len == 0 || memcmp(a->out.data, b->out.data, a->out.len) == 0);
		check(a->events.len == b->events.len);
		check(a->events.len == 0 ||
		      memcmp(a->events.data, b->events.data, a->events.len) == 0);
		check(a->in_head == b->in_head);
	} else {
		size_t n = MIN(a->out.len, b->out.len);

		check(n == 0 || memcmp(a->out.data, b->out.data, n) == 0);
	}
}

/* Without an inject event, what went on is the input (but for the start
 * of a head still gathered). */
static void unchanged(const struct run *r, const uint8_t *in, size_t len)
{
	if (r->status != EGRESS_HTTP_OK || r->injects)
		return;
	check(r->out.len == len || (r->in_head && r->out.len < len));
	check(r->out.len == 0 || memcmp(r->out.data, in, r->out.len) == 0);
}

static void values_ok(const struct run *r, const uint8_t *in, size_t len)
{
	if (!has(in, len, V_FOREIGN))
		check(!has(r->out.data, r->out.len, V_FOREIGN));
	if (!has(in, len, V_UNFIT))
		check(!has(r->out.data, r->out.len, V_UNFIT));
	if (!has(in, len, V_APIKEY))
		only_in_api_key(r->out.data, r->out.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in f = { data, size };
	uint32_t seed = fuzz_take(&f, 4) | 1;
	const uint8_t *in = f.in;
	size_t len = MIN(f.left, (size_t)STREAM_MAX);
	struct egress_bindings b = {
		.bound = plain,
		.nr_bound = ARRAY_SIZE(plain),
		.foreign = foreign,
		.nr_foreign = ARRAY_SIZE(foreign),
	};
	struct run whole, split;

	feed(&whole, in, len, &b, 0);
	feed(&split, in, len, &b, seed);
	same(&whole, &split);
	values_ok(&whole, in, len);
	values_ok(&split, in, len);
	unchanged(&whole, in, len);
	if (!has(in, len, "gantry-ph-") && !has_case(in, len, "basic"))
		check(whole.injects == 0);
	done(&whole);
	done(&split);

	/* With the connection's host (seed's low bit): a request for
	 * another is refused before anything of it goes on. */
	b.bound = formatted;
	b.host = seed & 2 ? "api.test" : NULL;
	feed(&whole, in, len, &b, 0);
	feed(&split, in, len, &b, seed);
	same(&whole, &split);
	values_ok(&whole, in, len);
	values_ok(&split, in, len);
	unchanged(&whole, in, len);
	done(&whole);
	done(&split);
	return 0;
}
