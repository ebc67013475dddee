/* The network worker as a process (net_worker_main in a child), driven
 * over its two SEQPACKET sockets the way the VMM and the supervisor drive
 * it: the start handshake, ARP for the gateway, TCP to .254 reaching a
 * listener on the host's 127.0.0.1, frames to 127.0.0.1 and 0.0.0.0 that
 * reach nothing, the gateway's own answers, DNS through the proxy to an
 * upstream this test plays (UDP, and TCP through libslirp to the proxy's
 * socket), control requests, and exit on EOF. Loopback
 * only: no frame here is addressed beyond the host. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "net/frame.h"
#include "net/net.h"
#include "net/worker.h"

#define WAIT_MS 3000

static const uint8_t guest_mac[6] = NET_GUEST_MAC;
static const uint8_t gw_mac[6] = NET_GATEWAY_MAC;

struct w {
	pid_t pid;
	int frames, ctl;
};

/* allow_local: --allow-local-net, for tests of .254 that are not about
 * the local-network wall. */
static int worker_start_wall(struct w *w, const char *dns, const char *port, bool allow_local)
{
	int fr[2], ctl[2];
	char fd1[16], fd2[16];

	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fr), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl), 0);
	w->pid = fork();
	assert_true(w->pid >= 0);
	if (w->pid == 0) {
		char *argv[10] = { "--frame-fd", fd1, "--ctl-fd", fd2, "--dns", (char *)dns };
		int argc = 6;

		close(fr[0]);
		close(ctl[0]);
		snprintf(fd1, sizeof(fd1), "%d", fr[1]);
		snprintf(fd2, sizeof(fd2), "%d", ctl[1]);
		if (port) {
			argv[argc++] = "-p";
			argv[argc++] = (char *)port;
		}
		if (allow_local)
			argv[argc++] = "--allow-local-net";
		_exit(net_worker_main(argc, argv));
	}
	close(fr[1]);
	close(ctl[1]);
	w->frames = fr[0];
	w->ctl = ctl[0];
	return 0;
}

static int worker_start(struct w *w, const char *dns, const char *port)
{
	return worker_start_wall(w, dns, port, false);
}

static int worker_wait(struct w *w)
{
	int status;

	assert_int_equal(waitpid(w->pid, &status, 0), w->pid);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1;
}

static json_t *ctl_recv(struct w *w)
{
	static char buf[1 << 20];
	ssize_t n;

	assert_true(readable(w->ctl, WAIT_MS));
	n = recv(w->ctl, buf, sizeof(buf), 0);
	assert_true(n > 0);
	return json_loadb(buf, (size_t)n, 0, NULL);
}

static json_t *ctl(struct w *w, const char *req)
{
	assert_int_equal(send(w->ctl, req, strlen(req), 0), (ssize_t)strlen(req));
	return ctl_recv(w);
}

static void expect_ok_handshake(struct w *w)
{
	json_t *j = ctl_recv(w);

	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
}

/* A UDP socket on 127.0.0.1 playing the upstream resolver. */
static int upstream(char *spec, size_t len)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	snprintf(spec, len, "127.0.0.1:%u", ntohs(a.sin_port));
	return fd;
}

static int listener(uint16_t *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* --- frames from the guest ------------------------------------------- */

static size_t ipv4(uint8_t *b, uint8_t proto, uint32_t dst, const uint8_t *l4, size_t l4_len,
		   size_t csum_off)
{
	uint8_t *ip = b + FRAME_IP, *p = b + FRAME_L4;
	uint32_t s = 0;

	memcpy(b, gw_mac, 6);
	memcpy(b + 6, guest_mac, 6);
	frame_put16(b + 12, ETH_TYPE_IPV4);
	memset(ip, 0, IPV4_HLEN);
	ip[0] = 0x45;
	frame_put16(ip + 2, (uint16_t)(IPV4_HLEN + l4_len));
	frame_put16(ip + 6, 0x4000);
	ip[8] = 64;
	ip[9] = proto;
	frame_put32(ip + 12, NET_GUEST);
	frame_put32(ip + 16, dst);
	frame_put16(ip + 10, frame_csum_fold(frame_csum_add(0, ip, IPV4_HLEN)));
	memcpy(p, l4, l4_len);
	if (proto != IPPROTO_NUM_ICMP)
		s = frame_csum_pseudo(NET_GUEST, dst, proto, (uint16_t)l4_len);
	frame_put16(p + csum_off, frame_csum_fold(frame_csum_add(s, p, l4_len)));
	return FRAME_L4 + l4_len;
}

static void send_segment(struct w *w, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags,
			 uint32_t seq, uint32_t ack, const uint8_t *data, size_t len)
{
	uint8_t t[TCP_HLEN + 256] = { 0 }, b[400];

	assert_true(len <= 256);
	frame_put16(t, sport);
	frame_put16(t + 2, dport);
	frame_put32(t + 4, seq);
	frame_put32(t + 8, ack);
	t[12] = 5 << 4;
	t[13] = flags;
	frame_put16(t + 14, 65535);
	if (len)
		memcpy(t + TCP_HLEN, data, len);
	assert_true(send(w->frames, b, ipv4(b, IPPROTO_NUM_TCP, dst, t, TCP_HLEN + len, 16), 0) >
		    0);
}

static void send_tcp(struct w *w, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t flags)
{
	send_segment(w, dst, sport, dport, flags, 1000, 0, NULL, 0);
}

static void send_udp(struct w *w, uint32_t dst, uint16_t dport, const uint8_t *data, size_t len)
{
	uint8_t u[512] = { 0 }, b[600];

	frame_put16(u, 40000);
	frame_put16(u + 2, dport);
	frame_put16(u + 4, (uint16_t)(UDP_HLEN + len));
	memcpy(u + UDP_HLEN, data, len);
	assert_true(send(w->frames, b, ipv4(b, IPPROTO_NUM_UDP, dst, u, UDP_HLEN + len, 6), 0) > 0);
}

/* What a guest does with libslirp's "who has .2?": answer it. */
static void arp_answer(struct w *w, const uint8_t *req)
{
	uint8_t a[42];

	memcpy(a, req + 6, 6);
	memcpy(a + 6, guest_mac, 6);
	memcpy(a + 12, req + 12, 8);
	frame_put16(a + 20, 2);
	memcpy(a + 22, guest_mac, 6);
	frame_put32(a + 28, NET_GUEST);
	memcpy(a + 32, req + 22, 10);
	assert_int_equal(send(w->frames, a, sizeof(a), 0), (ssize_t)sizeof(a));
}

/* The next frame to the guest that matches, or 0 bytes. */
static size_t recv_frame(struct w *w, uint8_t *b, size_t cap, uint16_t type, int proto)
{
	ssize_t n;

	while (readable(w->frames, WAIT_MS)) {
		n = recv(w->frames, b, cap, 0);
		assert_true(n >= NET_ETH_HLEN);
		if (type != ETH_TYPE_ARP && frame_get16(b + 12) == ETH_TYPE_ARP && n >= 42 &&
		    frame_get16(b + 20) == 1 && frame_get32(b + 38) == NET_GUEST)
			arp_answer(w, b);
		if (frame_get16(b + 12) != type)
			continue;
		if (type == ETH_TYPE_IPV4 && (n < FRAME_L4 || b[FRAME_IP + 9] != proto))
			continue;
		if (type == ETH_TYPE_IPV4)
			assert_memory_equal(b, guest_mac, 6);
		return (size_t)n;
	}
	return 0;
}

/* --- tests ----------------------------------------------------------- */

static void test_arp_and_tcp_to_host(void **state)
{
	struct w w;
	char dns[32];
	uint8_t b[70000], a[42] = { 0 };
	uint16_t port;
	int up = upstream(dns, sizeof(dns)), lst = listener(&port), c;
	size_t n;

	(void)state;
	worker_start_wall(&w, dns, NULL, true);
	expect_ok_handshake(&w);

	memset(a, 0xff, 6);
	memcpy(a + 6, guest_mac, 6);
	frame_put16(a + 12, ETH_TYPE_ARP);
	frame_put16(a + 14, 1);
	frame_put16(a + 16, ETH_TYPE_IPV4);
	a[18] = 6;
	a[19] = 4;
	frame_put16(a + 20, 1);
	memcpy(a + 22, guest_mac, 6);
	frame_put32(a + 28, NET_GUEST);
	frame_put32(a + 38, NET_GATEWAY);
	assert_int_equal(send(w.frames, a, sizeof(a), 0), (ssize_t)sizeof(a));
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_ARP, 0);
	assert_true(n >= 42);
	assert_int_equal(frame_get16(b + 20), 2);
	assert_memory_equal(b + 22, gw_mac, 6);
	assert_int_equal(frame_get32(b + 28), NET_GATEWAY);

	send_tcp(&w, NET_HOST, 40001, port, TCP_SYN);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_TCP);
	assert_true(n >= FRAME_L4 + TCP_HLEN);
	assert_int_equal(b[FRAME_L4 + 13] & (TCP_SYN | TCP_ACK), TCP_SYN | TCP_ACK);
	assert_int_equal(frame_get32(b + FRAME_IP + 12), NET_HOST);
	assert_true(readable(lst, WAIT_MS));
	c = accept(lst, NULL, NULL);
	assert_true(c >= 0);
	close(c);

	close(w.frames);
	assert_int_equal(worker_wait(&w), 0);
	close(w.ctl);
	close(lst);
	close(up);
}

static void test_host_loopback_unreachable(void **state)
{
	struct w w;
	char dns[32];
	uint16_t port;
	int up = upstream(dns, sizeof(dns)), lst = listener(&port);
	json_t *j, *drops;

	(void)state;
	worker_start(&w, dns, NULL);
	expect_ok_handshake(&w);
	send_tcp(&w, 0x7f000001, 40002, port, TCP_SYN);
	send_tcp(&w, 0, 40003, port, TCP_SYN);
	send_udp(&w, 0xffffffff, port, (const uint8_t *)"x", 1);
	assert_false(readable(lst, 300));
	j = ctl(&w, "{\"op\":\"traffic\"}");
	drops = json_object_get(json_object_get(j, "traffic"), "drops");
	assert_int_equal(json_integer_value(json_object_get(drops, "dst_loopback")), 1);
	assert_int_equal(json_integer_value(json_object_get(drops, "dst_zero")), 1);
	assert_int_equal(json_integer_value(json_object_get(drops, "dst_broadcast")), 1);
	json_decref(j);

	close(w.ctl);
	assert_int_equal(worker_wait(&w), 0);
	close(w.frames);
	close(lst);
	close(up);
}

/* A query for example.com A, ID 0x1234. */
static const uint8_t query[] = { 0x12, 0x34, 1,	  0,   0,   1, 0,   0,	 0,   0, 0, 0, 7, 'e', 'x',
				 'a',  'm',  'p', 'l', 'e', 3, 'c', 'o', 'm', 0, 0, 1, 0, 1 };

/* The upstream's side: the query it got, answered with QR set. */
static void upstream_answer(int up)
{
	uint8_t buf[512];
	struct sockaddr_in from;
	socklen_t flen = sizeof(from);
	ssize_t m;

	assert_true(readable(up, WAIT_MS));
	m = recvfrom(up, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen);
	assert_int_equal(m, sizeof(query));
	assert_memory_equal(buf + 2, query + 2, sizeof(query) - 2);
	buf[2] = 0x81;
	buf[3] = 0x80;
	assert_int_equal(sendto(up, buf, (size_t)m, 0, (struct sockaddr *)&from, flen), m);
}

static void test_gateway(void **state)
{
	struct w w;
	char dns[32];
	uint8_t b[70000], icmp[ICMP_HLEN + 16] = { ICMP_ECHO };
	int up = upstream(dns, sizeof(dns));
	size_t n;

	(void)state;
	worker_start(&w, dns, NULL);
	expect_ok_handshake(&w);

	frame_put16(icmp + 4, 7);
	assert_true(send(w.frames, b, ipv4(b, IPPROTO_NUM_ICMP, NET_GATEWAY, icmp, sizeof(icmp), 2),
			 0) > 0);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_ICMP);
	assert_int_equal(n, FRAME_L4 + sizeof(icmp));
	assert_int_equal(b[FRAME_L4], ICMP_ECHO_REPLY);

	send_tcp(&w, NET_GATEWAY, 40004, 22, TCP_SYN);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_TCP);
	assert_true(n > 0);
	assert_true(b[FRAME_L4 + 13] & TCP_RST);

	send_udp(&w, NET_GATEWAY, 123, (const uint8_t *)"x", 1);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_ICMP);
	assert_true(n > 0);
	assert_int_equal(b[FRAME_L4], ICMP_UNREACH);
	assert_int_equal(b[FRAME_L4 + 1], ICMP_PORT_UNREACH);

	/* DNS over UDP: the proxy asks our upstream under a fresh ID. */
	send_udp(&w, NET_GATEWAY, 53, query, sizeof(query));
	upstream_answer(up);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_UDP);
	assert_int_equal(n, FRAME_L4 + UDP_HLEN + sizeof(query));
	assert_int_equal(frame_get32(b + FRAME_IP + 12), NET_GATEWAY);
	assert_int_equal(frame_get16(b + FRAME_L4), 53);
	assert_int_equal(frame_get16(b + FRAME_L4 + UDP_HLEN), 0x1234);
	assert_true(frame_l4_csum_ok(b + FRAME_IP, b + FRAME_L4, n - FRAME_L4, IPPROTO_NUM_UDP));

	close(w.frames);
	assert_int_equal(worker_wait(&w), 0);
	close(w.ctl);
	close(up);
}

/* TCP to .1:53: libslirp takes the connection to the proxy's Unix socket. */
static void test_dns_over_tcp(void **state)
{
	struct w w;
	char dns[32];
	uint8_t b[70000], msg[2 + sizeof(query)];
	int up = upstream(dns, sizeof(dns));
	uint32_t iss;
	size_t n;

	(void)state;
	worker_start(&w, dns, NULL);
	expect_ok_handshake(&w);
	send_segment(&w, NET_GATEWAY, 40010, 53, TCP_SYN, 7000, 0, NULL, 0);
	n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_TCP);
	assert_true(n >= FRAME_L4 + TCP_HLEN);
	assert_int_equal(b[FRAME_L4 + 13] & (TCP_SYN | TCP_ACK), TCP_SYN | TCP_ACK);
	iss = frame_get32(b + FRAME_L4 + 4);
	send_segment(&w, NET_GATEWAY, 40010, 53, TCP_ACK, 7001, iss + 1, NULL, 0);
	frame_put16(msg, sizeof(query));
	memcpy(msg + 2, query, sizeof(query));
	send_segment(&w, NET_GATEWAY, 40010, 53, TCP_ACK | TCP_PSH, 7001, iss + 1, msg,
		     sizeof(msg));
	upstream_answer(up);
	/* The answer, framed, from .1:53 (bare ACKs skipped). */
	do
		n = recv_frame(&w, b, sizeof(b), ETH_TYPE_IPV4, IPPROTO_NUM_TCP);
	while (n == FRAME_L4 + TCP_HLEN);
	assert_int_equal(n, FRAME_L4 + TCP_HLEN + sizeof(msg));
	assert_int_equal(frame_get32(b + FRAME_IP + 12), NET_GATEWAY);
	assert_int_equal(frame_get16(b + FRAME_L4), 53);
	assert_int_equal(frame_get16(b + FRAME_L4 + TCP_HLEN), sizeof(query));
	assert_int_equal(frame_get16(b + FRAME_L4 + TCP_HLEN + 2), 0x1234);

	close(w.frames);
	assert_int_equal(worker_wait(&w), 0);
	close(w.ctl);
	close(up);
}

static void test_control(void **state)
{
	struct w w;
	char dns[32], req[128];
	uint16_t busy_port;
	int up = upstream(dns, sizeof(dns)), busy = listener(&busy_port);
	json_t *j;
	const char *spec;

	(void)state;
	worker_start(&w, dns, "127.0.0.1:0:80");
	expect_ok_handshake(&w);

	snprintf(req, sizeof(req), "{\"op\":\"publish\",\"spec\":\"127.0.0.1:%u:8080\"}",
		 busy_port);
	j = ctl(&w, req);
	assert_true(json_is_false(json_object_get(j, "ok")));
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "address in use"));
	json_decref(j);

	j = ctl(&w, "{\"op\":\"publish\",\"spec\":\"127.0.0.1:0:5353/udp\"}");
	assert_true(json_is_true(json_object_get(j, "ok")));
	spec = json_string_value(json_object_get(j, "spec"));
	assert_non_null(spec);
	assert_non_null(strstr(spec, ":5353/udp"));
	assert_null(strstr(spec, ":0:"));
	snprintf(req, sizeof(req), "{\"op\":\"unpublish\",\"spec\":\"%s\"}", spec);
	json_decref(j);
	j = ctl(&w, req);
	assert_true(json_is_true(json_object_get(j, "ok")));
	json_decref(j);
	j = ctl(&w, req);
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_decref(j);

	j = ctl(&w, "{\"op\":\"reboot\"}");
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_decref(j);
	j = ctl(&w, "{\"op\":");
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_decref(j);
	j = ctl(&w, "{\"op\":\"traffic\"}");
	assert_true(json_is_true(json_object_get(j, "ok")));
	assert_true(json_is_array(json_object_get(json_object_get(j, "traffic"), "destinations")));
	assert_true(json_is_integer(json_object_get(json_object_get(j, "traffic"), "evicted")));
	json_decref(j);

	close(w.ctl);
	assert_int_equal(worker_wait(&w), 0);
	close(w.frames);
	close(busy);
	close(up);
}

static void test_start_fails_on_busy_port(void **state)
{
	struct w w;
	char dns[32], spec[64];
	uint16_t port;
	int up = upstream(dns, sizeof(dns)), busy = listener(&port);
	json_t *j;

	(void)state;
	snprintf(spec, sizeof(spec), "127.0.0.1:%u:80", port);
	worker_start(&w, dns, spec);
	j = ctl_recv(&w);
	assert_true(json_is_false(json_object_get(j, "ok")));
	assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "address in use"));
	json_decref(j);
	assert_int_equal(worker_wait(&w), 1);
	close(w.ctl);
	close(w.frames);
	close(busy);
	close(up);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arp_and_tcp_to_host),
		cmocka_unit_test(test_host_loopback_unreachable),
		cmocka_unit_test(test_gateway),
		cmocka_unit_test(test_dns_over_tcp),
		cmocka_unit_test(test_control),
		cmocka_unit_test(test_start_fails_on_busy_port),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
