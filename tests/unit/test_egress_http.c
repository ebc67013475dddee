/* Unit tests for src/egress/http.c: placeholders in request headers
 * replaced (Bearer, x-api-key, several, inside Basic credentials), left
 * where the secret is for another header, another host or its value
 * cannot go in a head, a header added from a format; bodies, requests
 * after an Upgrade or a CONNECT passed on as they are; heads over the
 * bounds and malformed requests refused. Every stream is fed whole, a
 * byte at a time, in odd pieces and a step a call, with the same output
 * and events; a burst of pipelined requests given a long value each is
 * rewritten no faster than the host takes it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/util.h"
#include "egress/http.h"

#include "skip.h"

#define PH_TOKEN  "gantry-ph-0123456789abcdef"
#define PH_APIKEY "gantry-ph-aaaaaaaaaaaaaaaa"
#define PH_BEARER "gantry-ph-bbbbbbbbbbbbbbbb"
#define PH_UNFIT  "gantry-ph-cccccccccccccccc"
#define PH_OTHER  "gantry-ph-ffffffffffffffff"

static const struct egress_binding bound[] = {
	{ .name = "TOKEN",
	  .placeholder = PH_TOKEN,
	  .value = (const uint8_t *)"sk-real-token",
	  .value_len = 13 },
	{ .name = "APIKEY",
	  .placeholder = PH_APIKEY,
	  .value = (const uint8_t *)"key-REAL",
	  .value_len = 8,
	  .header = "x-api-key" },
	{ .name = "UNFIT",
	  .placeholder = PH_UNFIT,
	  .value = (const uint8_t *)"bad\r\nX-Evil: 1",
	  .value_len = 14 },
};
static const struct egress_binding foreign[] = {
	{ .name = "OTHER", .placeholder = PH_OTHER },
};
static const struct egress_bindings bindings = {
	.bound = bound,
	.nr_bound = ARRAY_SIZE(bound),
	.foreign = foreign,
	.nr_foreign = ARRAY_SIZE(foreign),
};

static const struct egress_binding with_format[] = {
	{ .name = "BEARER",
	  .placeholder = PH_BEARER,
	  .value = (const uint8_t *)"tok-REAL",
	  .value_len = 8,
	  .header = "Authorization",
	  .format = "Bearer %s" },
	{ .name = "SECOND",
	  .placeholder = PH_TOKEN,
	  .value = (const uint8_t *)"second",
	  .value_len = 6,
	  .header = "authorization",
	  .format = "token %s" },
	{ .name = "UNFIT",
	  .placeholder = PH_UNFIT,
	  .value = (const uint8_t *)"bad\nvalue",
	  .value_len = 9,
	  .header = "X-Unfit",
	  .format = "%s" },
};
static const struct egress_bindings formats = {
	.bound = with_format,
	.nr_bound = ARRAY_SIZE(with_format),
};

struct result {
	enum egress_http_status status;
	char *out; /* NUL-terminated */
	size_t len;
	char events[4096];
};

static void on_event(void *opaque, enum egress_event_kind kind, const char *name,
		     const char *header)
{
	static const char *const kinds[] = { "inject", "misplaced", "foreign", "unfit" };
	struct result *r = opaque;
	size_t n = strlen(r->events);

	snprintf(r->events + n, sizeof(r->events) - n, "%s %s %s\n", kinds[kind], name, header);
}

static struct egress_http *new_http(void)
{
	struct egress_http *h = NULL;
	gantry_error_t err = NULL;

	if (egress_http_new(&h, &err) < 0)
		skip_because("%s", gantry_error_str(err));
	return h;
}

/* in fed in pieces of step bytes (0: whole), each call given room: what
 * it leaves is fed again at once, as the worker does once up has room. */
static void run_room(const char *in, size_t len, const struct egress_bindings *b, size_t step,
		     size_t room, struct result *r)
{
	struct egress_http *h = new_http();
	struct egress_buf out = { 0 };
	size_t n, used;

	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < len; i += used) {
		n = step ? MIN(step, len - i) : len - i;
		r->status = egress_http_feed(h, (const uint8_t *)in + i, n, &used, b, &out, room,
					     on_event, r);
		assert_true(used <= n);
		if (r->status != EGRESS_HTTP_OK)
			used = n; /* the rest is fed too: it must add nothing */
		assert_true(used > 0);
		if (room == SIZE_MAX)
			assert_int_equal(used, n);
	}
	r->len = out.len;
	r->out = xzalloc(out.len + 1);
	if (out.len)
		memcpy(r->out, out.data, out.len);
	egress_buf_wipe_free(&out);
	egress_http_free(h);
}

static void run(const char *in, size_t len, const struct egress_bindings *b, size_t step,
		struct result *r)
{
	run_room(in, len, b, step, SIZE_MAX, r);
}

/* in (whole, a byte at a time, in pieces, a step a call) gives status,
 * want (for OK) and events. */
static void expect_n(const char *in, size_t len, const struct egress_bindings *b,
		     enum egress_http_status status, const char *want, const char *events)
{
	static const struct {
		size_t step, room;
	} ways[] = { { 1, SIZE_MAX },  { 2, SIZE_MAX }, { 7, SIZE_MAX },
		     { 64, SIZE_MAX }, { 0, 1 },	{ 64, 1 } };
	struct result first, r;

	run(in, len, b, 0, &first);
	if (first.status != status)
		fail_msg("status %s, not %s, for\n%s", egress_http_status_str(first.status),
			 egress_http_status_str(status), in);
	if (status == EGRESS_HTTP_OK && want) {
		assert_int_equal(first.len, strlen(want));
		assert_string_equal(first.out, want);
	}
	if (events)
		assert_string_equal(first.events, events);
	for (size_t i = 0; i < ARRAY_SIZE(ways); i++) {
		run_room(in, len, b, ways[i].step, ways[i].room, &r);
		assert_int_equal(r.status, first.status);
		if (status == EGRESS_HTTP_OK) {
			assert_int_equal(r.len, first.len);
			assert_memory_equal(r.out, first.out, r.len);
		} else { /* each a prefix of what would have gone on */
			assert_memory_equal(r.out, first.out, MIN(r.len, first.len));
		}
		assert_string_equal(r.events, first.events);
		free(r.out);
	}
	free(first.out);
}

static void expect(const char *in, const struct egress_bindings *b, enum egress_http_status status,
		   const char *want, const char *events)
{
	expect_n(in, strlen(in), b, status, want, events);
}

#define GET "GET /v1/x HTTP/1.1\r\nHost: api.test\r\n"

static void test_bearer(void **state)
{
	(void)state;
	expect(GET "Authorization: Bearer " PH_TOKEN "\r\nAccept: */*\r\n\r\n", &bindings,
	       EGRESS_HTTP_OK, GET "Authorization: Bearer sk-real-token\r\nAccept: */*\r\n\r\n",
	       "inject TOKEN Authorization\n");
	/* No placeholder: the head as it came, to the byte. */
	expect(GET "authorization:Bearer nothing   \r\n\r\n", &bindings, EGRESS_HTTP_OK,
	       GET "authorization:Bearer nothing   \r\n\r\n", "");
	/* No bindings at all. */
	expect(GET "X-Token: " PH_TOKEN "\r\n\r\n", NULL, EGRESS_HTTP_OK, GET "X-Token: " PH_TOKEN "\r\n\r\n",
	       "");
}

static void test_api_key_and_restriction(void **state)
{
	(void)state;
	expect(GET "X-Api-Key: " PH_APIKEY "\r\n\r\n", &bindings, EGRESS_HTTP_OK,
	       GET "X-Api-Key: key-REAL\r\n\r\n", "inject APIKEY X-Api-Key\n");
	/* Bound to x-api-key: left in any other header. */
	expect(GET "Authorization: Bearer " PH_APIKEY "\r\nX-Echo: " PH_APIKEY "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Bearer " PH_APIKEY "\r\nX-Echo: " PH_APIKEY "\r\n\r\n",
	       "misplaced APIKEY Authorization\nmisplaced APIKEY X-Echo\n");
	/* Without header=: credential headers alone (Authorization, names
	 * ending in -key, -token, -secret); servers echo the others. */
	expect(GET "Origin: " PH_TOKEN "\r\nX-Request-Id: " PH_TOKEN
		   "\r\nAccess-Control-Request-Headers: " PH_TOKEN "\r\nX-Client-Secret: " PH_TOKEN
		   "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Origin: " PH_TOKEN "\r\nX-Request-Id: " PH_TOKEN
		   "\r\nAccess-Control-Request-Headers: " PH_TOKEN
		   "\r\nX-Client-Secret: sk-real-token\r\n\r\n",
	       "misplaced TOKEN Origin\nmisplaced TOKEN X-Request-Id\n"
	       "misplaced TOKEN Access-Control-Request-Headers\ninject TOKEN X-Client-Secret\n");
	/* Basic credentials: the password alone, never the user name. */
	expect(GET "Authorization: Basic Z2FudHJ5LXBoLTAxMjM0NTY3ODlhYmNkZWY6eA==\r\n\r\n", &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Basic Z2FudHJ5LXBoLTAxMjM0NTY3ODlhYmNkZWY6eA==\r\n\r\n", "");
}

static void test_several(void **state)
{
	(void)state;
	/* Every occurrence, one event for the line; two secrets in one. */
	expect(GET "X-Token: " PH_TOKEN "," PH_TOKEN " " PH_TOKEN "\r\n"
		   "x-api-key: a" PH_APIKEY "b" PH_TOKEN "c\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "X-Token: sk-real-token,sk-real-token sk-real-token\r\n"
		   "x-api-key: akey-REALbsk-real-tokenc\r\n\r\n",
	       "inject TOKEN X-Token\ninject TOKEN x-api-key\ninject APIKEY x-api-key\n");
}

static void test_format(void **state)
{
	(void)state;
	/* No Authorization: the first format's header is added (one only);
	 * the unfit value's header is not. */
	expect(GET "Accept: */*\r\n\r\n", &formats, EGRESS_HTTP_OK,
	       GET "Accept: */*\r\nAuthorization: Bearer tok-REAL\r\n\r\n",
	       "inject BEARER Authorization\nunfit UNFIT X-Unfit\n");
	/* The guest's own Authorization stays, without a placeholder too. */
	expect(GET "AUTHORIZATION: Basic Zm9vOmJhcg==\r\nX-Unfit: 1\r\n\r\n", &formats,
	       EGRESS_HTTP_OK, GET "AUTHORIZATION: Basic Zm9vOmJhcg==\r\nX-Unfit: 1\r\n\r\n", "");
	/* With the placeholder, the ordinary rule. */
	expect(GET "Authorization: Bearer " PH_BEARER "\r\n\r\n", &formats, EGRESS_HTTP_OK,
	       GET "Authorization: Bearer tok-REAL\r\n\r\n",
	       "inject BEARER Authorization\nunfit UNFIT X-Unfit\n");
}

static void test_basic(void **state)
{
	(void)state;
	/* "x-access-token:" PH_TOKEN, then with the real value. */
	expect(GET "Authorization: Basic "
		   "eC1hY2Nlc3MtdG9rZW46Z2FudHJ5LXBoLTAxMjM0NTY3ODlhYmNkZWY=\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Basic eC1hY2Nlc3MtdG9rZW46c2stcmVhbC10b2tlbg==\r\n\r\n",
	       "inject TOKEN Authorization\n");
	/* Case and whitespace of the scheme kept; Proxy-Authorization too. */
	expect(GET "proxy-authorization:  bAsIc   "
		   "eC1hY2Nlc3MtdG9rZW46Z2FudHJ5LXBoLTAxMjM0NTY3ODlhYmNkZWY= \r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "proxy-authorization:  bAsIc   "
		   "eC1hY2Nlc3MtdG9rZW46c2stcmVhbC10b2tlbg== \r\n\r\n",
	       "inject TOKEN proxy-authorization\n");
	/* "u:" PH_APIKEY: bound to x-api-key, so misplaced. */
	expect(GET "Authorization: Basic dTpnYW50cnktcGgtYWFhYWFhYWFhYWFhYWFhYQ==\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Basic dTpnYW50cnktcGgtYWFhYWFhYWFhYWFhYWFhYQ==\r\n\r\n",
	       "misplaced APIKEY Authorization\n");
	/* "u:" PH_OTHER: foreign, unchanged. */
	expect(GET "Authorization: Basic dTpnYW50cnktcGgtZmZmZmZmZmZmZmZmZmZmZg==\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Basic dTpnYW50cnktcGgtZmZmZmZmZmZmZmZmZmZmZg==\r\n\r\n",
	       "foreign OTHER Authorization\n");
	/* Not strict base64 (a stray bit, no padding): left as it is. */
	expect(GET "Authorization: Basic dTpnYW50cnktcGgtMDEyMzQ1Njc4OWFiY2RlZh==\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       GET "Authorization: Basic dTpnYW50cnktcGgtMDEyMzQ1Njc4OWFiY2RlZh==\r\n\r\n", "");
	expect(GET "Authorization: Basic dTpnYW50cnktcGgtMDEyMzQ1Njc4OWFiY2RlZg\r\n\r\n", &bindings,
	       EGRESS_HTTP_OK,
	       GET "Authorization: Basic dTpnYW50cnktcGgtMDEyMzQ1Njc4OWFiY2RlZg\r\n\r\n", "");
}

static void test_foreign_and_unfit(void **state)
{
	(void)state;
	expect(GET "X-Other: " PH_OTHER "\r\n\r\n", &bindings, EGRESS_HTTP_OK,
	       GET "X-Other: " PH_OTHER "\r\n\r\n", "foreign OTHER X-Other\n");
	/* A value with a line break never goes into a head. */
	expect(GET "X-Key: " PH_UNFIT "\r\n\r\n", &bindings, EGRESS_HTTP_OK,
	       GET "X-Key: " PH_UNFIT "\r\n\r\n", "unfit UNFIT X-Key\n");
	/* Header names in events: as sent (token characters), cut short. */
	expect(GET
	       "X-0123456789012345678901234567890123456789012345678901234567890123456789: " PH_OTHER
	       "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK, NULL,
	       "foreign OTHER X-01234567890123456789012345678901234567890123456789012345678901\n");
}

#define BODY_PH "{\"k\":\"" PH_TOKEN "\"}" /* 34 bytes */

static void test_bodies(void **state)
{
	(void)state;
	/* Content-Length: the body goes on as it is, the next head is read. */
	expect("POST /a HTTP/1.1\r\nContent-Length: 34\r\nX-Token: " PH_TOKEN "\r\n\r\n" BODY_PH
	       "GET /b HTTP/1.1\r\nX-Token: " PH_TOKEN "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       "POST /a HTTP/1.1\r\nContent-Length: 34\r\nX-Token: sk-real-token\r\n\r\n" BODY_PH
	       "GET /b HTTP/1.1\r\nX-Token: sk-real-token\r\n\r\n",
	       "inject TOKEN X-Token\ninject TOKEN X-Token\n");
	/* A body that looks like a head is not one. */
	expect("POST /a HTTP/1.1\r\nContent-Length: 49\r\n\r\nGET / HTTP/1.1\r\nX: " PH_TOKEN
	       "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       "POST /a HTTP/1.1\r\nContent-Length: 49\r\n\r\nGET / HTTP/1.1\r\nX: " PH_TOKEN
	       "\r\n\r\n",
	       "");
	/* Chunked, with an extension and a trailer. */
	expect("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "22;x=y\r\n" BODY_PH "\r\n3\r\nabc\r\n0\r\nX-Trailer: " PH_TOKEN "\r\n\r\n"
	       "GET /d HTTP/1.1\r\nX-Token: " PH_TOKEN "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
	       "22;x=y\r\n" BODY_PH "\r\n3\r\nabc\r\n0\r\nX-Trailer: " PH_TOKEN "\r\n\r\n"
	       "GET /d HTTP/1.1\r\nX-Token: sk-real-token\r\n\r\n",
	       "inject TOKEN X-Token\n");
	/* Chunked framing that some servers read otherwise. */
	expect("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
	       &bindings, EGRESS_HTTP_BAD, NULL, NULL);
	expect("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXY0\r\n\r\n",
	       &bindings, EGRESS_HTTP_BAD, NULL, NULL);
	expect("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n",
	       &bindings, EGRESS_HTTP_BAD, NULL, NULL);
	expect("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded\r\n\r\n",
	       &bindings, EGRESS_HTTP_BAD, NULL, NULL);
}

static void test_pipelined(void **state)
{
	(void)state;
	expect("\r\nGET /1 HTTP/1.1\r\nX-Api-Key: " PH_APIKEY "\r\n\r\n"
	       "HEAD /2 HTTP/1.1\r\nA-Token: " PH_TOKEN "\r\n\r\n"
	       "DELETE /3 HTTP/1.1\r\nB: " PH_OTHER "\r\n\r\n",
	       &bindings, EGRESS_HTTP_OK,
	       "\r\nGET /1 HTTP/1.1\r\nX-Api-Key: key-REAL\r\n\r\n"
	       "HEAD /2 HTTP/1.1\r\nA-Token: sk-real-token\r\n\r\n"
	       "DELETE /3 HTTP/1.1\r\nB: " PH_OTHER "\r\n\r\n",
	       "inject APIKEY X-Api-Key\ninject TOKEN A-Token\nforeign OTHER B\n");
}

#define BURST_HIGH  (256 * 1024)    /* the worker's UP_HIGH */
#define BURST_VALUE (64 * 1024)	    /* SECRET_VALUE_MAX */
#define BURST_TAKE  (64 * 1024 + 1) /* what the host takes at a time */
/* A request of the burst, but for its blank line. */
#define BURST_REQ "GET /%04zu HTTP/1.1\r\nHost: a.io\r\n"

static void count_inject(void *opaque, enum egress_event_kind kind, const char *name,
			 const char *header)
{
	(void)name;
	(void)header;
	assert_int_equal(kind, EGRESS_EV_INJECT);
	(*(size_t *)opaque)++;
}

/* Request i of the burst as the host must get it. */
static void burst_want(struct egress_buf *want, size_t i, const uint8_t *value)
{
	char line[64];

	want->len = 0;
	snprintf(line, sizeof(line), BURST_REQ, i);
	egress_buf_append(want, line, strlen(line));
	egress_buf_append(want, "Authorization: Bearer ", 22);
	egress_buf_append(want, value, BURST_VALUE);
	egress_buf_append(want, "\r\n\r\n", 4);
}

/* A TLS record's worth of pipelined minimal requests, each given a long
 * value by a format, fed as the worker feeds it (while what waits for the
 * host is under its mark, the host taking some at a time): what waits
 * stays within one head of the mark, and every request goes on once,
 * rewritten, in order. Fed whole, it would be 31 MB at once. */
static void test_burst_bounded(void **state)
{
	uint8_t *value = xmalloc(BURST_VALUE);
	const struct egress_binding big = { .name = "BIG",
					    .placeholder = PH_BEARER,
					    .value = value,
					    .value_len = BURST_VALUE,
					    .header = "Authorization",
					    .format = "Bearer %s" };
	const struct egress_bindings b = { .bound = &big, .nr_bound = 1 };
	struct egress_http *h = new_http();
	struct egress_buf out = { 0 }, want = { 0 };
	char in[16380];
	size_t len = 0, nr = 0, off = 0, feeds = 0, events = 0, got = 0, want_off = 0;
	size_t used, n, m, head_out;

	(void)state;
	memset(value, 'v', BURST_VALUE);
	while (sizeof(in) - len > 34)
		len += (size_t)snprintf(in + len, sizeof(in) - len, BURST_REQ "\r\n", nr++);
	burst_want(&want, 0, value);
	head_out = want.len;
	want_off = want.len;
	while (off < len || out.len) {
		if (off < len && out.len < BURST_HIGH) {
			assert_int_equal(egress_http_feed(h, (const uint8_t *)in + off, len - off,
							  &used, &b, &out, BURST_HIGH - out.len,
							  count_inject, &events),
					 EGRESS_HTTP_OK);
			assert_true(used > 0);
			off += used;
			assert_true(out.len < BURST_HIGH + head_out);
			if (feeds++ == 0)
				assert_true(off < len);
		}
		/* The host takes some: the requests, whole and in order. */
		n = MIN(out.len, (size_t)BURST_TAKE);
		for (size_t k = 0; k < n; k += m) {
			if (want_off == want.len) {
				burst_want(&want, got++, value);
				want_off = 0;
			}
			m = MIN(n - k, want.len - want_off);
			assert_memory_equal(out.data + k, want.data + want_off, m);
			want_off += m;
		}
		egress_buf_consume(&out, n);
	}
	assert_int_equal(got, nr);
	assert_int_equal(want_off, want.len);
	assert_int_equal(events, nr);
	assert_true(feeds > nr / 8);
	egress_buf_wipe_free(&want);
	egress_buf_wipe_free(&out);
	egress_http_free(h);
	free(value);
}

static void test_upgrade_and_connect(void **state)
{
	static const char ws[] = "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
				 "X-Token: " PH_TOKEN "\r\n\r\n";
	static const char ws_out[] = "GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: "
				     "Upgrade\r\nX-Token: sk-real-token\r\n\r\n";
	static const char after[] = "\x81\x05hello\0\nGET / HTTP/1.1\r\nX-Token: " PH_TOKEN "\r\n\r\n";
	char in[512], want[512];
	size_t n = strlen(ws), m = strlen(ws_out);

	(void)state;
	/* After the Upgrade's head, no HTTP: bytes pass as they are. */
	memcpy(in, ws, n);
	memcpy(in + n, after, sizeof(after));
	memcpy(want, ws_out, m);
	memcpy(want + m, after, sizeof(after));
	{
		struct result r;

		for (size_t step = 0; step < 4; step++) {
			run(in, n + sizeof(after) - 1, &bindings, step, &r);
			assert_int_equal(r.status, EGRESS_HTTP_OK);
			assert_int_equal(r.len, m + sizeof(after) - 1);
			assert_memory_equal(r.out, want, r.len);
			assert_string_equal(r.events, "inject TOKEN X-Token\n");
			free(r.out);
		}
	}
	expect("CONNECT db.test:5432 HTTP/1.1\r\nHost: db.test:5432\r\nProxy-Authorization: "
	       "Bearer " PH_TOKEN "\r\n\r\nanything\r\n\r\n X: " PH_TOKEN,
	       &bindings, EGRESS_HTTP_OK,
	       "CONNECT db.test:5432 HTTP/1.1\r\nHost: db.test:5432\r\nProxy-Authorization: "
	       "Bearer sk-real-token\r\n\r\nanything\r\n\r\n X: " PH_TOKEN,
	       "inject TOKEN Proxy-Authorization\n");
	/* Upgrade without "Connection: upgrade": not an upgrade to
	 * http_parser, one to a front end that switches on Upgrade alone,
	 * which would tunnel what we read on as heads. Refused. */
	expect("GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nX-Token: " PH_TOKEN "\r\n\r\n",
	       &bindings, EGRESS_HTTP_BAD, NULL, "");
	/* An Upgrade with a body: the body first, then raw. */
	expect("POST /u HTTP/1.1\r\nUpgrade: x\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\n"
	       "ab\x01\x02 junk",
	       &bindings, EGRESS_HTTP_OK,
	       "POST /u HTTP/1.1\r\nUpgrade: x\r\nConnection: upgrade\r\nContent-Length: 2\r\n\r\n"
	       "ab\x01\x02 junk",
	       "");
}

static void test_too_big(void **state)
{
	static char in[EGRESS_HTTP_HEAD_MAX + 128];
	static uint8_t value[100000];
	static struct egress_binding big = {
		.name = "BIG", .placeholder = PH_TOKEN, .value = value, .value_len = sizeof(value)
	};
	struct egress_bindings bb = { .bound = &big, .nr_bound = 1 };
	size_t n = EGRESS_HTTP_HEAD_MAX + 100;
	char *p = in;

	(void)state;
	/* A head over EGRESS_HTTP_HEAD_MAX, and one just at it. */
	p += sprintf(p, "GET / HTTP/1.1\r\nX-Token: ");
	memset(p, 'a', n - (size_t)(p - in));
	in[n] = '\0';
	expect(in, &bindings, EGRESS_HTTP_TOO_BIG, NULL, "");
	memcpy(in + EGRESS_HTTP_HEAD_MAX - 4, "\r\n\r\n", 5);
	expect(in, &bindings, EGRESS_HTTP_OK, in, "");
	/* Too many header lines. */
	p = in + sprintf(in, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < EGRESS_HTTP_LINES_MAX; i++)
		p += sprintf(p, "X-Token: %d\r\n", i);
	strcpy(p, "\r\n");
	expect(in, &bindings, EGRESS_HTTP_OK, in, "");
	strcpy(p, "Y: 1\r\n\r\n");
	expect(in, &bindings, EGRESS_HTTP_TOO_BIG, NULL, "");
	/* A head the values would make too big: refused before any event. */
	memset(value, 'v', sizeof(value));
	sprintf(in, "GET / HTTP/1.1\r\nX-Token: %s %s %s\r\n\r\n", PH_TOKEN, PH_TOKEN, PH_TOKEN);
	expect(in, &bb, EGRESS_HTTP_TOO_BIG, NULL, "");
	sprintf(in, "GET / HTTP/1.1\r\nX-Token: %s %s\r\n\r\n", PH_TOKEN, PH_TOKEN);
	expect(in, &bb, EGRESS_HTTP_OK, NULL, "inject BIG X-Token\n");
}

static void test_malformed(void **state)
{
	struct egress_http *h;
	struct egress_buf out = { 0 };
	size_t used;
	static const char *const bad[] = {
		"GARBAGE\r\n\r\n",
		"GET / HTTP/1.1\nHost: a\n\n",		/* bare LF */
		"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",	/* lone CR */
		"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", /* obs-fold */
		"GET / HTTP/1.1\r\nX : a\r\n\r\n",	/* space before colon */
		"GET / HTTP/1.1\r\nX: a\x01\r\n\r\n",	/* control byte */
		"GET\t/ HTTP/1.1\r\n\r\n",		/* tab in the request line */
		"GET  / HTTP/1.1\r\n\r\n",		/* two spaces */
		"GET / HTTP/1.1 \r\n\r\n",
		"GET /a b HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
		"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n\x16\x03\x01",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		expect(bad[i], &bindings, EGRESS_HTTP_BAD, NULL, "");
	/* A NUL, inside a value. */
	expect_n(GET "X: a\0b\r\n\r\n", sizeof(GET "X: a\0b\r\n\r\n") - 1, &bindings,
		 EGRESS_HTTP_BAD, NULL, "");
	/* Once refused, always: nothing more goes on. */
	h = new_http();
	assert_int_equal(egress_http_feed(h, (const uint8_t *)"GET / HTTP/1.1\r\nX: a\n", 21, &used,
					  &bindings, &out, SIZE_MAX, NULL, NULL),
			 EGRESS_HTTP_BAD);
	assert_int_equal(egress_http_feed(h, (const uint8_t *)"\r\nGET / HTTP/1.1\r\n\r\n", 20,
					  &used, &bindings, &out, SIZE_MAX, NULL, NULL),
			 EGRESS_HTTP_BAD);
	assert_int_equal(used, 0);
	assert_int_equal(out.len, 0);
	assert_false(egress_http_in_head(h));
	egress_http_free(h);
}

static void test_in_head_and_buf(void **state)
{
	struct egress_http *h = new_http();
	struct egress_buf out = { 0 };
	static const char head[] = GET "X-Token: " PH_TOKEN "\r\n\r\n";
	size_t n, used;

	(void)state;
	assert_false(egress_http_in_head(h));
	assert_int_equal(egress_http_feed(h, (const uint8_t *)head, 10, &used, &bindings, &out,
					  SIZE_MAX, NULL, NULL),
			 EGRESS_HTTP_OK);
	assert_true(egress_http_in_head(h));
	assert_int_equal(out.len, 0);
	assert_int_equal(egress_http_feed(h, (const uint8_t *)head + 10, sizeof(head) - 11, &used,
					  &bindings, &out, SIZE_MAX, NULL, NULL),
			 EGRESS_HTTP_OK);
	assert_false(egress_http_in_head(h));
	assert_int_equal(out.len, strlen(GET "X-Token: sk-real-token\r\n\r\n"));
	/* What the caller sent on leaves, zeroed. */
	n = out.len;
	egress_buf_consume(&out, strlen(GET));
	assert_memory_equal(out.data, "X-Token: sk-real-token\r\n\r\n", out.len);
	for (size_t i = out.len; i < n; i++)
		assert_int_equal(out.data[i], 0);
	egress_buf_wipe_free(&out);
	assert_null(out.data);
	egress_http_free(h);
}

/* One stream with each kind of request: any split, the same. */
static void test_any_split(void **state)
{
	static const char in[] = "\r\nPOST /a HTTP/1.1\r\nAuthorization: Basic "
				 "eC1hY2Nlc3MtdG9rZW46Z2FudHJ5LXBoLTAxMjM0NTY3ODlhYmNkZWY=\r\n"
				 "Content-Length: 34\r\n\r\n" BODY_PH
				 "PUT /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
				 "X-Api-Key: " PH_APIKEY "\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"
				 "GET /c HTTP/1.1\r\nX-O: " PH_OTHER
				 "\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
				 "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" PH_TOKEN;
	struct result whole, r;

	(void)state;
	run(in, sizeof(in) - 1, &bindings, 0, &whole);
	assert_int_equal(whole.status, EGRESS_HTTP_OK);
	assert_non_null(strstr(whole.out, "c2stcmVhbC10b2tlbg=="));
	assert_non_null(strstr(whole.out, "X-Api-Key: key-REAL\r\n"));
	assert_string_equal(whole.events, "inject TOKEN Authorization\ninject APIKEY X-Api-Key\n"
					  "foreign OTHER X-O\n");
	for (size_t step = 1; step <= sizeof(in); step++) {
		run(in, sizeof(in) - 1, &bindings, step, &r);
		assert_int_equal(r.status, EGRESS_HTTP_OK);
		assert_string_equal(r.out, whole.out);
		assert_string_equal(r.events, whole.events);
		free(r.out);
	}
	free(whole.out);
}

/* With the connection's host: each request must be for it alone. */
static void test_route(void **state)
{
	struct egress_bindings routed = bindings;
	static const char *const misdirected[] = {
		"GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test.evil\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test:8443\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: api.test\r\nHost: evil.test\r\n\r\n",
		"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
		"GET https://evil.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n",
	};
	static const char *const refused[] = {
		"CONNECT evil.test:443 HTTP/1.1\r\nHost: api.test\r\n\r\n",
		"TRACE / HTTP/1.1\r\nHost: api.test\r\n\r\n",
	};

	(void)state;
	routed.host = "api.test";
	for (size_t i = 0; i < ARRAY_SIZE(misdirected); i++)
		expect(misdirected[i], &routed, EGRESS_HTTP_MISDIRECTED, NULL, "");
	for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
		expect(refused[i], &routed, EGRESS_HTTP_METHOD, NULL, "");
	expect("GET / HTTP/1.1\r\nHost: API.Test:443\r\n\r\n", &routed, EGRESS_HTTP_OK,
	       "GET / HTTP/1.1\r\nHost: API.Test:443\r\n\r\n", "");
	expect("GET https://api.test:443/v1 HTTP/1.1\r\nHost: api.test\r\n\r\n", &routed,
	       EGRESS_HTTP_OK, "GET https://api.test:443/v1 HTTP/1.1\r\nHost: api.test\r\n\r\n", "");
	expect("OPTIONS * HTTP/1.1\r\nHost: api.test\r\n\r\n", &routed, EGRESS_HTTP_OK,
	       "OPTIONS * HTTP/1.1\r\nHost: api.test\r\n\r\n", "");
	/* A value goes only with a request for the host. */
	expect(GET "Authorization: Bearer " PH_TOKEN "\r\n\r\n", &routed, EGRESS_HTTP_OK,
	       GET "Authorization: Bearer sk-real-token\r\n\r\n", "inject TOKEN Authorization\n");
	expect("GET / HTTP/1.1\r\nHost: evil.test\r\nAuthorization: Bearer " PH_TOKEN "\r\n\r\n",
	       &routed, EGRESS_HTTP_MISDIRECTED, NULL, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bearer),
		cmocka_unit_test(test_api_key_and_restriction),
		cmocka_unit_test(test_several),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_basic),
		cmocka_unit_test(test_foreign_and_unfit),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_pipelined),
		cmocka_unit_test(test_burst_bounded),
		cmocka_unit_test(test_upgrade_and_connect),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_in_head_and_buf),
		cmocka_unit_test(test_any_split),
		cmocka_unit_test(test_route),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
