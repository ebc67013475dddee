/* libFuzzer target for the DNS proxy's parsers (net/dns.h): the queries a
 * hostile guest sends and the answers a hostile upstream sends back.
 *
 * Input: one mode byte, then
 *   mode bit 0 clear: a guest query, through dns_query_parse and then the
 *     whole UDP path of a proxy with no upstream (FORMERR, local zone,
 *     REFUSED by a hook, SERVFAIL); every answer it sends must be a DNS
 *     answer to that query, within DNS_UDP_MAX.
 *   mode bit 0 set: a 2-byte big-endian length L, L bytes of query, then an
 *     upstream answer: when the query passes the check, the answer goes
 *     through dns_answer_learn; every name it learns must be a valid
 *     lowercased name.
 * Seeds: tests/fuzz/corpus/dns, written by tests/fuzz/mkcorpus.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "net/dns.h"

static const uint8_t *cur_query;

static void check_name(const char *name)
{
	size_t n = strlen(name), label = 0;

	check(n <= DNS_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (c == '.') {
			check(label > 0);
			label = 0;
			continue;
		}
		check((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
		check(++label <= 63);
	}
	check(n == 0 || label > 0);
}

static void on_answer(void *opaque, uint16_t port, const uint8_t *msg, size_t len)
{
	(void)opaque;
	check(port == 5353);
	check(len >= 12 && len <= DNS_UDP_MAX);
	check(memcmp(msg, cur_query, 2) == 0); /* the guest's ID */
	check(msg[2] & 0x80);		       /* QR */
	check((msg[3] & 0xf) <= 5);
}

/* Refuse about half the names, by their length. */
static bool on_allow(void *opaque, const struct dns_question *q)
{
	(void)opaque;
	check_name(q->name);
	return strlen(q->name) % 2 == 0;
}

static void on_learned(void *opaque, const struct dns_question *q, const char *name,
		       struct in_addr ip, uint32_t ttl)
{
	(void)opaque;
	(void)ip;
	check_name(q->name);
	check(ttl < 0x80000000u);
	check_name(name);
}

static struct dns_proxy *proxy(void)
{
	static struct dns_proxy *p;
	static const struct dns_hooks hooks = { .udp_answer = on_answer, .allow = on_allow };
	static const struct sockaddr_in none;
	gantry_error_t err = NULL;

	if (!p && dns_proxy_new(&p, &hooks, &none, 0, NULL, &err) < 0)
		abort();
	return p;
}

static void query(const uint8_t *data, size_t size)
{
	struct dns_question q;

	if (dns_query_parse(data, size, &q) == 0) {
		check_name(q.name);
		check(q.qclass == 1);
		check(q.end >= 17 && q.end <= size);
	} else {
		check(q.end == 0 || (q.end >= 17 && q.end <= size));
	}
	if (size < 2)
		return;
	cur_query = data;
	/* Past the rate limit's burst, REFUSED: the clock moves on instead. */
	dns_proxy_clock_skew(proxy(), 1000);
	dns_proxy_udp_query(proxy(), 5353, data, size);
}

static void answer(const uint8_t *data, size_t size)
{
	static const struct dns_hooks hooks = { .learned = on_learned };
	struct dns_question q;
	size_t qlen;
	int end;

	if (size < 2)
		return;
	qlen = (size_t)data[0] << 8 | data[1];
	data += 2;
	size -= 2;
	if (qlen > size || dns_query_parse(data, qlen, &q) != 0)
		return;
	end = dns_answer_learn(data + qlen, size - qlen, &q, &hooks);
	check(end == -1 || (end >= 17 && (size_t)end <= size - qlen));
	if (end > 0) {
		/* The TTL cap writes only inside the answer it was given
		 * (ASan sees the rest), past its header and question. A
		 * hostile answer's names may point into a TTL it cuts, so
		 * what follows may read differently afterwards: the addresses
		 * were learned before. */
		uint8_t *copy = malloc(size - qlen);

		check(copy != NULL);
		memcpy(copy, data + qlen, size - qlen);
		dns_answer_cap_ttl(copy, size - qlen, (size_t)end, 300);
		check(memcmp(copy, data + qlen, (size_t)end) == 0);
		free(copy);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		answer(data + 1, size - 1);
	else
		query(data + 1, size - 1);
	return 0;
}
