/* OAuth custody served to a guest (see service.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "oauth/custody.h"
#include "oauth/service.h"
#include "proto/agent.h"

/* A login's URL, to the guest that asked: its tool shows it. */
static void url_to_guest(void *opaque, const char *url)
{
	int fd = *(int *)opaque;

	log_info("OAuth custody: a login's URL sent to the guest that asked");
	if (write_full(fd, "open ", 5) < 0 || write_full(fd, url, strlen(url)) < 0 ||
	    write_full(fd, "\n", 1) < 0)
		log_warn("OAuth custody: the guest did not take the login's URL");
}

/* One request: "login NAME" or "token NAME", one line. */
static void serve(void *opaque, int fd)
{
	struct oauth_service *s = opaque;
	char line[OAUTH_NAME_MAX + 16], *name;
	cleanup_free char *answer = NULL;
	gantry_error_t err = NULL;
	ssize_t got = acceptor_read_line(&s->acc, fd, line, sizeof(line) - 1, OAUTH_REQUEST_MS);
	int r = -1;

	if (got < 0)
		goto out;
	if (!memchr(line, '\n', (size_t)got)) {
		gantry_error(&err, EINVAL, "the request is too long");
	} else {
		line[strcspn(line, "\n")] = '\0';
		name = strchr(line, ' ');
		if (name)
			*name++ = '\0';
		if (name == NULL || !oauth_name_valid(name))
			gantry_error(&err, EINVAL,
				     "no such request (login or token, and a provider)");
		else if (strcmp(line, "login") == 0)
			r = oauth_custody_login(s->custody, name, acceptor_stop_fd(&s->acc),
						s->url_to_guest ? url_to_guest : NULL, &fd, &answer,
						&err);
		else if (strcmp(line, "token") == 0)
			r = oauth_custody_token(s->custody, name, &answer, &err);
		else
			gantry_error(&err, EINVAL,
				     "no such request (login or token, and a provider)");
	}
	if (r == 0) {
		(void)!write_full(fd, answer, strlen(answer));
		(void)!write_full(fd, "\n", 1);
		explicit_bzero(answer, strlen(answer));
	} else {
		const char *why = gantry_error_str(err);

		log_warn("OAuth custody: %s", why);
		(void)!write_full(fd, why, strlen(why));
		(void)!write_full(fd, "\n", 1);
	}
	gantry_error_free(&err);
out:
	close(fd);
}

int oauth_service_open(struct oauth_service *s, struct doors *doors,
		       struct oauth_custody *custody, bool to_guest, gantry_error_t *err)
{
	*s = (struct oauth_service){ .acc = ACCEPTOR_NONE,
				     .custody = custody,
				     .url_to_guest = to_guest };
	if (acceptor_door(&s->acc, doors, PROTO_CUSTODY_PORT, OAUTH_SERVICE_CONNS, serve, s,
			  err) < 0)
		return gantry_error_prefix(err, "OAuth custody");
	return 0;
}

int oauth_service_run(struct oauth_service *s, gantry_error_t *err)
{
	return acceptor_run(&s->acc, "OAuth custody", err);
}

void oauth_service_stop(struct oauth_service *s)
{
	acceptor_stop(&s->acc);
}
