/* A one-shot exec's credential broker (see oneshot_broker.h): the
 * sandbox supervisor's gates (secret/broker.h, the egress policy, the
 * binding, the value), served on a thread of the `gantry exec` process
 * while its VM runs. One helper at a time: each has BROKER_WAIT_MS to ask
 * and take its answer, so a guest that holds a connection only delays
 * its own next request. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/log.h"
#include "common/util.h"
#include "net/policy.h"
#include "proto/agent.h"
#include "sandbox/network.h"
#include "sandbox/oneshot_broker.h"
#include "secret/broker.h"

/* poll() fd for POLLIN (or POLLOUT) until deadline, or the stop pipe. */
static bool wait_fd(struct oneshot_broker *b, int fd, short ev, uint64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = ev },
				       { .fd = acceptor_stop_fd(&b->acc), .events = POLLIN } };
		uint64_t now = now_ms();

		if (now >= deadline || poll(p, 2, (int)(deadline - now)) < 0) {
			if (errno == EINTR && now < deadline)
				continue;
			return false;
		}
		if (p[1].revents)
			return false;
		if (p[0].revents)
			return true;
	}
}

/* The answer for the request in, decided as the supervisor decides. */
static void decide(struct oneshot_broker *b, const char *in, struct broker_out *out)
{
	struct broker_req req;
	struct secret_value v;
	gantry_error_t err = NULL;
	const char *why;
	int r;

	if (broker_parse(in, &req, &why) < 0) {
		broker_refusal(out, why);
		return;
	}
	if (!sandbox_net_reaches(b->sb, req.host, &why)) {
		log_info("exec: credential for %s withheld: %s", req.host, why);
		broker_refusal(out, why);
		return;
	}
	r = secret_store_for_host(b->store, req.host, policy_domain_match, &v, &err);
	if (r == 0) {
		broker_refusal(out, "no secret is bound to that host");
	} else if (r < 0) {
		log_warn("exec: credential for %s withheld: %s", req.host, gantry_error_str(err));
		broker_refusal(out, "its source failed");
	} else if (broker_answer(&req, &v, out, &why) < 0) {
		broker_refusal(out, why);
	}
	gantry_error_free(&err);
	secret_value_free(&v);
}

static void serve_conn(void *opaque, int fd)
{
	struct oneshot_broker *b = opaque;
	uint64_t deadline = now_ms() + BROKER_WAIT_MS;
	char in[BROKER_REQUEST_MAX + 1];
	struct broker_out out = { 0 };
	size_t got = 0, sent = 0;

	in[0] = '\0';
	while (!broker_request_whole(in, got)) {
		ssize_t n;

		if (got == BROKER_REQUEST_MAX) {
			broker_refusal(&out, "the request is too long");
			break;
		}
		if (!wait_fd(b, fd, POLLIN, deadline))
			goto done;
		n = recv(fd, in + got, BROKER_REQUEST_MAX - got, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0 || memchr(in + got, '\0', (size_t)n))
			goto done;
		got += (size_t)n;
		in[got] = '\0';
	}
	if (out.text == NULL)
		decide(b, in, &out);
	while (out.text && sent < out.len && wait_fd(b, fd, POLLOUT, deadline)) {
		ssize_t n = send(fd, out.text + sent, out.len - sent, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		sent += (size_t)n;
	}
done:
	explicit_bzero(in, sizeof(in));
	broker_out_free(&out);
	close(fd);
}

int oneshot_broker_start(struct oneshot_broker *b, struct doors *doors, struct secret_store *st,
			 const struct sandbox *sb, gantry_error_t *err)
{
	*b = (struct oneshot_broker){ .acc = ACCEPTOR_NONE };
	if (st == NULL || !secret_store_has_bound(st))
		return 0;
	b->store = st;
	b->sb = sb;
	/* One helper at a time, on the acceptor's thread. */
	if (acceptor_door(&b->acc, doors, PROTO_BROKER_PORT, 0, serve_conn, b, err) < 0) {
		oneshot_broker_stop(b);
		return gantry_error_prefix(err, "the credential broker");
	}
	return 0;
}

int oneshot_broker_run(struct oneshot_broker *b, gantry_error_t *err)
{
	return acceptor_run(&b->acc, "the credential broker", err);
}

void oneshot_broker_stop(struct oneshot_broker *b)
{
	acceptor_stop(&b->acc);
}
