/* The OAuth bridge of a one-shot run (see oneshot_oauth.h). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/door.h"
#include "common/log.h"
#include "common/text.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "oauth/custody.h"
#include "oauth/service.h"
#include "proto/agent.h"
#include "sandbox/oneshot_oauth.h"

#define OAUTH_READ_MS 5000

/* The value of query parameter key in url, percent-decoded, or NULL. */
static char *query_param(const char *url, const char *key)
{
	const char *q = strchr(url, '?');

	return q ? oauth_query_param(q + 1, strcspn(q + 1, "#"), key) : NULL;
}

uint16_t oauth_callback_port(const char *url)
{
	static const char *const hosts[] = { "http://localhost:", "http://127.0.0.1:",
					     "http://[::1]:" };
	cleanup_free char *redirect = query_param(url, "redirect_uri");
	const char *p = NULL;
	unsigned long port;
	char *end;

	if (redirect == NULL)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(hosts) && p == NULL; i++)
		if (strncasecmp(redirect, hosts[i], strlen(hosts[i])) == 0)
			p = redirect + strlen(hosts[i]);
	if (p == NULL || !isdigit((unsigned char)*p))
		return 0;
	errno = 0;
	port = strtoul(p, &end, 10);
	/* A privileged port is none a login tool listens on; it is one a
	 * host service might be expected on. */
	if (errno || port < 1024 || port > 65535 || (*end && *end != '/' && *end != '?'))
		return 0;
	return (uint16_t)port;
}

/* One browser connection: into the guest's loopback port, through the
 * VMM's host-side vsock listener. */
static void replay(void *opaque, int browser)
{
	struct oauth_bridge_listener *l = opaque;
	struct oauth_bridge *b = l->b;
	uint8_t port[2] = { (uint8_t)b->port, (uint8_t)(b->port >> 8) };
	char line[64], hello[32], path[PATH_MAX];
	size_t got = 0;
	int guest = -1;

	snprintf(path, sizeof(path), "%s/vsock.sock", b->o->dir);
	snprintf(hello, sizeof(hello), "CONNECT %d\n", PROTO_OAUTH_REPLAY_PORT);
	guest = unix_connect(path, 0);
	if (guest < 0 || write_full(guest, hello, strlen(hello)) < 0)
		goto out;
	/* "OK <hostport>\n", read up to its newline only. */
	while (got < sizeof(line) - 1) {
		struct pollfd p = { .fd = guest, .events = POLLIN };

		if (poll(&p, 1, OAUTH_READ_MS) <= 0 || read(guest, line + got, 1) != 1)
			goto out;
		if (line[got++] == '\n')
			break;
	}
	line[got] = '\0';
	if (strncmp(line, "OK ", 3) != 0 || write_full(guest, port, sizeof(port)) < 0)
		goto out;
	acceptor_join(&l->acc, browser, guest);
out:
	if (guest >= 0)
		close(guest);
	close(browser);
}

static int bridge_open(struct oneshot_oauth *o, uint16_t port, const char **why)
{
	struct oauth_bridge *b;
	gantry_error_t err = NULL;
	uint16_t p4 = port, p6 = port;
	int fd, fd6, r;

	for (unsigned int i = 0; i < o->nr; i++)
		if (o->bridges[i].port == port)
			return 0;
	if (o->nr == ONESHOT_OAUTH_PORTS) {
		*why = "too many login callbacks in one run";
		return -1;
	}
	/* Both loopbacks: a browser may take either for "localhost", and one
	 * held by another process would hand it the callback. */
	fd = loopback_listen(AF_INET, &p4);
	if (fd < 0)
		return *why = "the callback's port is taken on the host", -1;
	fd6 = loopback_listen(AF_INET6, &p6);
	if (fd6 < 0 && errno != EADDRNOTAVAIL && errno != EAFNOSUPPORT) {
		close(fd);
		return *why = "the callback's port is taken on the host's [::1]", -1;
	}
	b = &o->bridges[o->nr];
	*b = (struct oauth_bridge){ .o = o,
				    .port = port,
				    .l4 = { .b = b, .acc = ACCEPTOR_NONE },
				    .l6 = { .b = b, .acc = ACCEPTOR_NONE } };
	/* Each listener is its acceptor's to close, even when adopting fails. */
	r = acceptor_adopt(&b->l4.acc, fd, ONESHOT_OAUTH_CONNS, replay, &b->l4, &err);
	if (fd6 >= 0 &&
	    acceptor_adopt(&b->l6.acc, fd6, ONESHOT_OAUTH_CONNS, replay, &b->l6, &err) < 0)
		r = -1;
	if (r < 0 || acceptor_run(&b->l4.acc, "the OAuth bridge", &err) < 0 ||
	    acceptor_run(&b->l6.acc, "the OAuth bridge", &err) < 0) {
		acceptor_stop(&b->l4.acc);
		acceptor_stop(&b->l6.acc);
		gantry_error_free(&err);
		*why = "cannot serve the callback";
		return -1;
	}
	o->nr++;
	return 0;
}

/* One open-url request: the URL shown, its callback bridged. */
static void serve_open(void *opaque, int fd)
{
	struct oneshot_oauth *o = opaque;
	char *url = xmalloc(PROTO_OAUTH_URL_MAX + 2);
	const char *why = NULL;
	uint16_t port;
	ssize_t got = acceptor_read_line(&o->acc, fd, url, PROTO_OAUTH_URL_MAX + 1, OAUTH_READ_MS);

	if (got < 0)
		goto out;
	if (!memchr(url, '\n', (size_t)got)) {
		why = "the URL is too long";
	} else {
		url[strcspn(url, "\n")] = '\0';
		text_sanitize(url, PROTO_OAUTH_URL_MAX);
		if (strncmp(url, "https://", 8) != 0 && strncmp(url, "http://", 7) != 0) {
			why = "not an http(s) URL";
		} else {
			port = oauth_callback_port(url);
			pthread_mutex_lock(&o->lock);
			if (port && bridge_open(o, port, &why) < 0)
				log_warn("a login's callback to port %u cannot be bridged: %s", port,
					 why);
			pthread_mutex_unlock(&o->lock);
			log_always("a login inside the sandbox asks for a browser: open %s", url);
			if (port && why == NULL)
				log_always("(its answer to localhost:%u is carried into the sandbox)",
					   port);
		}
	}
	if (why)
		(void)!write(fd, why, strlen(why));
	else
		(void)!write(fd, "ok\n", 3);
out:
	free(url);
	close(fd);
}

int oneshot_oauth_start(struct oneshot_oauth *o, const char *dir, struct doors *doors, bool on,
			struct oauth_custody *custody, gantry_error_t *err)
{
	*o = (struct oneshot_oauth){ .acc = ACCEPTOR_NONE,
				     .custody = OAUTH_SERVICE_NONE,
				     .lock = PTHREAD_MUTEX_INITIALIZER };
	o->dir = xstrdup(dir);
	if (on && acceptor_door(&o->acc, doors, PROTO_OAUTH_PORT, 0, serve_open, o, err) < 0)
		return gantry_error_prefix(err, "the OAuth bridge");
	/* The run's stderr is the user's: a login's URL is shown there. */
	if (custody && oauth_service_open(&o->custody, doors, custody, false, err) < 0)
		return -1;
	return 0;
}

int oneshot_oauth_run(struct oneshot_oauth *o, gantry_error_t *err)
{
	if (acceptor_run(&o->acc, "the OAuth bridge", err) < 0)
		return -1;
	return oauth_service_run(&o->custody, err);
}

void oneshot_oauth_stop(struct oneshot_oauth *o)
{
	acceptor_stop(&o->acc);
	oauth_service_stop(&o->custody);
	for (unsigned int i = 0; i < o->nr; i++) {
		acceptor_stop(&o->bridges[i].l4.acc);
		acceptor_stop(&o->bridges[i].l6.acc);
	}
	o->nr = 0;
	free(o->dir);
	o->dir = NULL;
	pthread_mutex_destroy(&o->lock);
}
