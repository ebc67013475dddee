/* The supervisor's loop against a fake guest and real ctl.sock clients,
 * second part: the requests that reach past the guest's sessions. Ports
 * published and unpublished through a fake network worker, share.add and
 * share.rm against the fake guest and the real share server, the
 * credential broker on its door, and a refused secret.set's value. The rig
 * is supervisor_rig.h; a hostile guest or client against the loop is in
 * test_supervisor.c. No VM boots here. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"
#include "common/json.h"
#include "net/net.h"
#include "common/util.h"
#include "proto/agent.h"
#include "sandbox/ctl.h"
#include "supervisor/supervisor_priv.h"
#include "share/spec.h"
#include "supervisor_rig.h"

/* The share server's test client; not every helper of it is used here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "share_client.h"
#pragma GCC diagnostic pop

/* --- the network worker's control socket ---------------------------------------------------- */

/* A fake network worker: the peer end of the supervisor's control socket
 * to it, answering traffic polls with a canned snapshot and keeping the
 * other requests for the test to answer. */
struct fake_worker {
	int fd;
	json_t *got; /* the request it holds, unanswered */
	int polls;   /* traffic polls answered */
};

static void worker_answer(struct fake_worker *w, const char *msg)
{
	assert_int_equal(send(w->fd, msg, strlen(msg), 0), (ssize_t)strlen(msg));
}

static void worker_take(struct fake_worker *w)
{
	char buf[4096];
	ssize_t n;

	while (w->got == NULL && readable(w->fd) &&
	       (n = recv(w->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		const char *op;

		buf[n] = '\0';
		w->got = json_loads(buf, 0, NULL);
		assert_non_null(w->got);
		op = json_string_value(json_object_get(w->got, "op"));
		assert_non_null(op);
		if (strcmp(op, "traffic") == 0) {
			worker_answer(w, "{\"ok\":true,\"traffic\":{\"destinations\":[{\"addr\":"
					 "\"203.0.113.10\",\"proto\":\"tcp\",\"port\":443,"
					 "\"verdict\":\"allowed\",\"reason\":\"\",\"tx_bytes\":10,"
					 "\"rx_bytes\":20,\"tx_packets\":1,\"rx_packets\":2}],"
					 "\"drops\":{},\"evicted\":0}}");
			w->polls++;
			json_decref(w->got);
			w->got = NULL;
		}
	}
}

/* Serve rounds (the worker answering its polls) until fd is readable or
 * the worker holds a request; false when neither came in max_ms. */
static bool serve_worker(struct rig *r, struct fake_worker *w, int fd, int max_ms)
{
	uint64_t t0 = now_ms();

	while (now_ms() - t0 < (uint64_t)max_ms) {
		sup_serve_once(r->s, ROUND_MS);
		worker_take(w);
		if (w->got || (fd >= 0 && readable(fd)))
			return true;
	}
	return false;
}

static int net_client(struct rig *r, const char *op, const char *spec, bool ephemeral)
{
	char line[256];
	int fd;

	assert_int_equal(ctl_connect(r->dir, &fd, NULL), 0);
	snprintf(line, sizeof(line), "{\"op\":\"%s\",\"spec\":\"%s\",\"ephemeral\":%s}\n", op, spec,
		 ephemeral ? "true" : "false");
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	return fd;
}

static void assert_request(struct fake_worker *w, const char *op, const char *spec)
{
	assert_non_null(w->got);
	assert_string_equal(json_string_value(json_object_get(w->got, "op")), op);
	if (spec)
		assert_string_equal(json_string_value(json_object_get(w->got, "spec")), spec);
	json_decref(w->got);
	w->got = NULL;
}

static void read_answer(struct rig *r, struct fake_worker *w, int fd, char *line, size_t len)
{
	assert_true(serve_worker(r, w, fd, 2000));
	assert_true(readable(fd)); /* not a request to the worker instead */
	assert_int_equal(ctl_read_line(fd, line, len, 1000, NULL), 0);
}

/* The ports in the supervisor's sandbox.json. */
static size_t saved_ports(char ***v)
{
	cleanup_free char *buf = NULL;
	size_t len, n;
	json_t *j;

	assert_int_equal(read_file_max(SANDBOX_JSON, 1 << 20, &buf, &len, NULL), 0);
	assert_non_null(buf);
	j = json_loads(buf, 0, NULL);
	assert_int_equal(jsonh_strv(j, "ports", 64, v, &n, NULL), 0);
	json_decref(j);
	return n;
}

/* Publish and unpublish go to the worker one at a time and never hold the
 * loop; the answers land in the live list and sandbox.json (not for an
 * ephemeral port); a worker that does not answer in time gets the client
 * an error, its late answer still counts; traffic snapshots reach
 * network-traffic.json; a worker that hangs up leaves the sandbox running
 * with its link down. */
static void test_net_relay(void **state)
{
	struct rig *r = *state;
	struct fake_worker w = { .fd = -1 };
	char cwd[4096], line[CTL_LINE_MAX];
	cleanup_free char *traffic = NULL;
	char **ports = NULL;
	int sv[2], a, b, c;
	size_t len;

	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(r->dir), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	w.fd = sv[1];
	r->s->sb = (struct sandbox){ .name = xstrdup("t"),
				     .image = xstrdup("x"),
				     .image_path = xstrdup("/x.erofs"),
				     .state = SANDBOX_RUNNING,
				     .net = true };
	r->s->m.net_worker = NET_WORKER_NONE;
	r->s->m.net_worker.ctl_fd = sv[0];
	sup_net_init(r->s, sv[0], NULL, 0);

	/* One outstanding: the second waits, and status is answered meanwhile. */
	a = net_client(r, CTL_OP_PUBLISH, "127.0.0.1:18080:80", false);
	assert_true(serve_worker(r, &w, -1, 2000));
	assert_request(&w, "publish", "127.0.0.1:18080:80");
	b = net_client(r, CTL_OP_PUBLISH, "127.0.0.1:18081:81/udp", true);
	for (int i = 0; i < 5; i++)
		sup_serve_once(r->s, ROUND_MS);
	worker_take(&w);
	assert_null(w.got);
	assert_status_answered(r, 1000);
	worker_answer(&w, "{\"ok\":true}");
	read_answer(r, &w, a, line, sizeof(line));
	assert_string_equal(line, "{\"ok\":true}");
	assert_int_equal(saved_ports(&ports), 1);
	assert_string_equal(ports[0], "127.0.0.1:18080:80");
	strv_free(ports);
	assert_true(serve_worker(r, &w, -1, 2000));
	assert_request(&w, "publish", "127.0.0.1:18081:81/udp");
	worker_answer(&w, "{\"ok\":false,\"error\":\"port 127.0.0.1:18081/udp: address in use\"}");
	read_answer(r, &w, b, line, sizeof(line));
	assert_non_null(strstr(line, "address in use"));
	close(a);
	close(b);

	/* Refused before the worker hears of it. */
	a = net_client(r, CTL_OP_PUBLISH, "127.0.0.1:18080:90", false);
	read_answer(r, &w, a, line, sizeof(line));
	assert_non_null(strstr(line, "already published"));
	close(a);
	a = net_client(r, CTL_OP_UNPUBLISH, "127.0.0.1:18082:80", false);
	read_answer(r, &w, a, line, sizeof(line));
	assert_non_null(strstr(line, "is not published"));
	close(a);

	/* Ephemeral: live, not saved. */
	a = net_client(r, CTL_OP_PUBLISH, "127.0.0.1:18083:83", true);
	assert_true(serve_worker(r, &w, -1, 2000));
	assert_request(&w, "publish", "127.0.0.1:18083:83");
	worker_answer(&w, "{\"ok\":true}");
	read_answer(r, &w, a, line, sizeof(line));
	close(a);
	assert_int_equal(saved_ports(&ports), 1);
	strv_free(ports);
	a = net_client(r, CTL_OP_PORTS, "", false);
	read_answer(r, &w, a, line, sizeof(line));
	assert_non_null(strstr(line, "\"spec\":\"127.0.0.1:18080:80\",\"ephemeral\":false"));
	assert_non_null(strstr(line, "\"spec\":\"127.0.0.1:18083:83\",\"ephemeral\":true"));
	close(a);

	/* A worker silent past the deadline: the client hears so, the loop
	 * serves others, and the late answer is still applied. */
	a = net_client(r, CTL_OP_UNPUBLISH, "127.0.0.1:18080:80", false);
	assert_true(serve_worker(r, &w, -1, 2000));
	assert_request(&w, "unpublish", "127.0.0.1:18080:80");
	assert_status_answered(r, 1000);
	assert_true(serve_until(r, a, SUP_NET_MS + 2000) >= 0);
	assert_int_equal(ctl_read_line(a, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "did not answer in time"));
	close(a);
	c = net_client(r, CTL_OP_TRAFFIC, "", false);
	for (int i = 0; i < 5; i++)
		sup_serve_once(r->s, ROUND_MS);
	assert_false(readable(c)); /* behind the request still outstanding */
	worker_answer(&w, "{\"ok\":true}");
	/* Then the traffic request behind it goes, and is written. */
	read_answer(r, &w, c, line, sizeof(line));
	assert_string_equal(line, "{\"ok\":true}");
	close(c);
	assert_int_equal(saved_ports(&ports), 0);
	strv_free(ports);
	assert_int_equal(read_file_max(NET_TRAFFIC_FILE, 1 << 20, &traffic, &len, NULL), 0);
	assert_non_null(traffic);
	assert_non_null(strstr(traffic, "203.0.113.10"));
	assert_non_null(strstr(traffic, "\"updated\""));

	/* It hangs up: requests fail at once, the sandbox serves on. */
	close(w.fd);
	for (int i = 0; i < 5; i++)
		sup_serve_once(r->s, ROUND_MS);
	assert_int_equal(r->s->net.ctl, -1);
	assert_false(r->s->net.reap);
	a = net_client(r, CTL_OP_PUBLISH, "127.0.0.1:18084:84", false);
	assert_true(serve_until(r, a, 1000) >= 0);
	assert_int_equal(ctl_read_line(a, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "network link is down"));
	close(a);
	assert_status_answered(r, 1000);
	/* And what it ended with is kept for isolation.json. */
	assert_non_null(strstr(json_string_value(json_object_get(r->s->m.workers_gone, "net")),
				"network link is down"));

	sup_net_free(r->s);
	json_decref(r->s->m.workers_gone);
	sandbox_free(&r->s->sb);
	assert_int_equal(chdir(cwd), 0);
}

/* --- share.add and share.rm ----------------------------------------------------------------- */

/* The guest's next frame, which must be type; its id. */
static uint32_t guest_takes(struct rig *r, uint16_t type, const char *path)
{
	static uint8_t buf[PROTO_MAX_FRAME];
	struct proto_msg m;
	const char *why;
	uint32_t id;

	assert_true(serve_until(r, r->guest, 2000) >= 0);
	assert_int_equal(proto_read_msg(r->guest, buf, &m, &why), 1);
	assert_int_equal(m.type, type);
	assert_string_equal(m.u.mount.path, path);
	id = m.u.mount.id;
	proto_msg_free(&m);
	return id;
}

static void guest_done(struct rig *r, uint32_t id, uint32_t error, const char *message)
{
	struct proto_msg m = { .type = PROTO_DONE };

	m.u.done.id = id;
	m.u.done.error = error;
	m.u.done.message = (char *)message;
	assert_int_equal(proto_write_msg(r->guest, &m), 0);
}

static int share_client(struct rig *r, const char *json)
{
	int fd;

	assert_int_equal(ctl_connect(r->dir, &fd, NULL), 0);
	assert_int_equal(write(fd, json, strlen(json)), (ssize_t)strlen(json));
	return fd;
}

static void share_answer(struct rig *r, int fd, char *line, size_t len)
{
	assert_true(serve_until(r, fd, 2000) >= 0);
	assert_int_equal(ctl_read_line(fd, line, len, 1000, NULL), 0);
	close(fd);
}

/* share.add and share.rm against a fake guest and the real share server:
 * the export comes and goes with the guest's DONE, a remove waits for a
 * handle the guest holds, a failed mount leaves nothing, ids the guest
 * makes up change nothing. */
static void test_share_ops(void **state)
{
	struct rig *r = *state;
	struct cl *c = cl_new(0);
	char cwd[4096], line[CTL_LINE_MAX], req[1024];
	char dir[256];
	uint64_t node, fh;
	uint32_t id;
	int a;

	snprintf(dir, sizeof(dir), "%s", cl_path(c, "other"));
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(r->dir), 0);
	r->s->sb = (struct sandbox){ .name = xstrdup("t"),
				     .image = xstrdup("x"),
				     .image_path = xstrdup("/x.erofs"),
				     .state = SANDBOX_RUNNING,
				     .writable = true };
	r->s->m.shares = c->s;
	r->s->m.shares_live = true; /* as machine_config() says outside `required` */
	sup_shares_init(r->s);

	snprintf(req, sizeof(req), "{\"op\":\"share.add\",\"spec\":\"live=%s@/w\"}\n", dir);
	a = share_client(r, req);
	id = guest_takes(r, PROTO_MOUNT, "/w");
	guest_done(r, id + 100, 0, ""); /* not its id: nothing happens */
	for (int i = 0; i < 5; i++)
		sup_serve_once(r->s, ROUND_MS);
	assert_false(readable(a));
	guest_done(r, id, 0, "");
	share_answer(r, a, line, sizeof(line));
	assert_non_null(strstr(line, "\"ok\":true"));
	assert_int_equal(r->s->sb.nr_shares, 1); /* saved */

	/* The guest opens a file of it: the remove waits, then goes. */
	node = (uint64_t)cl_lookup(c, FUSE_ROOT_ID, "live");
	assert_true(node > 1);
	fh = (uint64_t)cl_open(c, FUSE_OPENDIR, node, O_RDONLY);
	a = share_client(r, "{\"op\":\"share.rm\",\"tag\":\"live\"}\n");
	for (int i = 0; i < 10; i++)
		sup_serve_once(r->s, ROUND_MS);
	assert_false(readable(r->guest));
	assert_false(readable(a));
	assert_int_equal(cl_release(c, FUSE_RELEASEDIR, node, fh), 0);
	id = guest_takes(r, PROTO_UNMOUNT, "/w");
	guest_done(r, id, EINVAL, "not mounted"); /* never was: gone all the same */
	share_answer(r, a, line, sizeof(line));
	assert_string_equal(line, "{\"ok\":true}");
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "live"), -ENOENT);
	assert_int_equal(r->s->sb.nr_shares, 0);

	/* A mount the guest fails: no export, not saved. */
	snprintf(req, sizeof(req),
		 "{\"op\":\"share.add\",\"spec\":\"bad=%s@/b\",\"ephemeral\":true}\n", dir);
	a = share_client(r, req);
	id = guest_takes(r, PROTO_MOUNT, "/b");
	guest_done(r, id, ENOTDIR, "make the mount point: Not a directory");
	share_answer(r, a, line, sizeof(line));
	assert_non_null(strstr(line, "could not mount it: make the mount point"));
	assert_int_equal(cl_lookup(c, FUSE_ROOT_ID, "bad"), -ENOENT);

	/* Refused before the guest hears of it. */
	a = share_client(r, "{\"op\":\"share.add\",\"spec\":\"x=/nonexistent-dir\"}\n");
	share_answer(r, a, line, sizeof(line));
	assert_non_null(strstr(line, "\"ok\":false"));
	a = share_client(r, "{\"op\":\"share.rm\",\"tag\":\"nosuch\"}\n");
	share_answer(r, a, line, sizeof(line));
	assert_non_null(strstr(line, "no share `nosuch`"));
	assert_false(readable(r->guest));

	r->s->m.shares = NULL;
	strv_free(r->s->shares.live);
	sandbox_free(&r->s->sb);
	cl_free(c);
	assert_int_equal(chdir(cwd), 0);
}

/* --- the credential broker and secret.set --------------------------------------------------- */

static int broker_dial(struct rig *r)
{
	int fd = doors_dial(&r->s->doors, PROTO_BROKER_PORT);

	assert_true(fd >= 0);
	assert_int_equal(fcntl(fd, F_SETFL, 0), 0);
	return fd;
}

/* A refused secret.set's value is read and thrown away, never taken as
 * the next request (here, one that would stop the sandbox); a good one's
 * value, in two pieces, is the secret's. */
static void test_secret_set_value(void **state)
{
	static const char value[] = "{\"op\":\"stop\"}\n";
	struct rig *r = *state;
	char line[512], req[256];
	int fd;

	secret_store_init(&r->s->secrets);
	assert_int_equal(ctl_connect(r->dir, &fd, NULL), 0);
	snprintf(req, sizeof(req), "{\"op\":\"secret.set\",\"spec\":\"K=v\",\"length\":%zu}\n%s",
		 sizeof(value) - 1, value);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	assert_true(serve_until(r, fd, 2000) >= 0);
	assert_int_equal(ctl_read_line(fd, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "\"ok\":false"));
	/* The same connection goes on: its next request is this one. */
	snprintf(req, sizeof(req), "{\"op\":\"status\"}\n");
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	assert_true(serve_until(r, fd, 2000) >= 0);
	assert_int_equal(ctl_read_line(fd, line, sizeof(line), 1000, NULL), 0);
	assert_non_null(strstr(line, "\"state\":\"running\""));
	assert_false(r->s->stopping);
	close(fd);
	secret_store_free(&r->s->secrets);
}

/* Ask the broker: the whole answer (until it closes) into out. */
static void broker_ask(struct rig *r, const char *req, size_t len, char *out, size_t cap)
{
	size_t got = 0;
	uint64_t t0 = now_ms();
	int fd = broker_dial(r);

	assert_int_equal(write(fd, req, len), (ssize_t)len);
	while (now_ms() - t0 < 3000) {
		ssize_t n;

		sup_serve_once(r->s, ROUND_MS);
		if (!readable(fd))
			continue;
		n = read(fd, out + got, cap - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(fd);
}

/* The credential broker: a host-bound secret for its host only, under the
 * egress policy; what is not a well-formed request is refused; a silent
 * helper is cut at its deadline while the loop goes on. */
static void test_broker(void **state)
{
	struct rig *r = *state;
	gantry_error_t err = NULL;
	char cwd[4096], out[8192], *big;
	int silent;

	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(r->dir), 0);
	secret_store_init(&r->s->secrets);
	sup_broker_init(r->s);
	assert_true(r->s->broker.listen >= 0);
	r->s->sb.net = true;
	assert_int_equal(secret_store_add(&r->s->secrets, "TOK@git.test,*.example.org", "s3cret", &err),
			 0);

#define ASK(req, out) broker_ask(r, req, sizeof(req) - 1, out, sizeof(out))
	ASK("protocol=https\nhost=git.test:8443\npath=o/r.git\n\n", out);
	assert_string_equal(out, "username=x-access-token\npassword=s3cret\n\n");
	ASK("protocol=http\nusername=me\nhost=Git.Example.ORG\n\n", out);
	assert_string_equal(out, "username=me\npassword=s3cret\n\n");
	ASK("protocol=https\nhost=other.test\n\n", out);
	assert_string_equal(out, "error=no secret is bound to that host\n\n");
	ASK("protocol=ftp\nhost=git.test\n\n", out);
	assert_non_null(strstr(out, "error=only https and http"));
	ASK("protocol=https\nhost=git..test\n\n", out);
	assert_non_null(strstr(out, "error=no host, or not a DNS name"));
	/* The egress policy first: a host it does not let the guest reach. */
	r->s->sb.net_policy = json_pack("{s:s}", "default", "deny");
	ASK("protocol=https\nhost=git.test\n\n", out);
	assert_string_equal(out, "error=the egress policy does not allow that host\n\n");
	json_decref(r->s->sb.net_policy);
	r->s->sb.net_policy = NULL;
	/* Too long, or a NUL in it: refused, or cut. */
	big = xmalloc(SUP_BROKER_IN + 100);
	memset(big, 'a', SUP_BROKER_IN + 100);
	broker_ask(r, big, SUP_BROKER_IN + 100, out, sizeof(out));
	assert_string_equal(out, "error=the request is too long\n\n");
	free(big);
	broker_ask(r, "host=git.test\0\n\n", 16, out, sizeof(out));
	assert_string_equal(out, "");
	/* A slow command is looked up off the loop: a status request is
	 * answered while it runs, and the helper gets its value after. */
	{
		static const char req[] = "protocol=https\nhost=slow.test\n\n";
		char script[] = "/tmp/gantry-slow.XXXXXX", *spec;
		int sfd = mkstemp(script), hfd;
		size_t got = 0;
		uint64_t t0;

		assert_true(sfd >= 0);
		assert_int_equal(write(sfd, "#!/bin/sh\nsleep 3\necho late\n", 29), 29);
		close(sfd);
		chmod(script, 0700);
		xasprintf(&spec, "SLOW@slow.test=!%s", script);
		assert_int_equal(secret_store_add(&r->s->secrets, spec, NULL, &err), 0);
		free(spec);
		hfd = broker_dial(r);
		assert_int_equal(write(hfd, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
		t0 = now_ms();
		/* Well inside the command's 3 s, however slow its fork. */
		assert_status_answered(r, 1500);
		assert_true(now_ms() - t0 < 2500);
		while (now_ms() - t0 < 10000) {
			ssize_t n;

			sup_serve_once(r->s, ROUND_MS);
			if (!readable(hfd))
				continue;
			n = read(hfd, out + got, sizeof(out) - 1 - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		out[got] = '\0';
		assert_string_equal(out, "username=x-access-token\npassword=late\n\n");
		close(hfd);
		unlink(script);
	}
	/* A helper that says nothing is cut at its deadline; the loop serves
	 * on meanwhile. */
	silent = broker_dial(r);
	assert_status_answered(r, 1000);
	/* Its deadline (SUP_BROKER_MS) brought forward, not waited for. */
	for (size_t i = 0; i < SUP_BROKER_CONNS; i++)
		if (r->s->broker.c[i].fd >= 0)
			r->s->broker.c[i].deadline = now_ms() + 200;
	assert_true(serve_until(r, silent, 2000) >= 0);
	assert_int_equal(read(silent, out, sizeof(out)), 0);
	close(silent);
#undef ASK

	close(r->s->broker.listen);
	close(r->s->broker.wake);
	secret_store_free(&r->s->secrets);
	unlink(SANDBOX_AUDIT);
	assert_int_equal(chdir(cwd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_net_relay, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_share_ops, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_broker, rig_setup, rig_teardown),
		cmocka_unit_test_setup_teardown(test_secret_set_value, rig_setup, rig_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
