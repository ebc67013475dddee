/* The credential broker's protocol (see broker.h). */
#include <stdio.h>
#include <string.h>

#include "proto/agent.h"
#include "secret/broker.h"

#define BROKER_USER "x-access-token"

char *const broker_git_env[] = {
	"GIT_CONFIG_COUNT=2",
	"GIT_CONFIG_KEY_0=credential.helper",
	"GIT_CONFIG_VALUE_0=",
	"GIT_CONFIG_KEY_1=credential.helper",
	"GIT_CONFIG_VALUE_1=" PROTO_HELPER_PATH " " PROTO_HELPER_ARG,
	NULL,
};

bool broker_request_whole(const char *in, size_t len)
{
	return (len && in[0] == '\n') || strstr(in, "\n\n") != NULL;
}

/* A request's value of key ("host="...), at most cap - 1 bytes; false
 * when it has none. */
static bool field(const char *req, const char *key, char *out, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *line = req; *line;) {
		size_t n = strcspn(line, "\n");

		if (n > klen && strncmp(line, key, klen) == 0 && n - klen < cap) {
			memcpy(out, line + klen, n - klen);
			out[n - klen] = '\0';
			return true;
		}
		line += n + (line[n] == '\n');
	}
	return false;
}

/* A host as git names it (maybe with a port): the DNS name, lowercased. */
static bool host_name(char *host)
{
	size_t n;

	host[strcspn(host, ":")] = '\0';
	n = strlen(host);
	if (n == 0 || n > SECRET_HOST_MAX || host[0] == '.' || host[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = host[i];

		if (ch >= 'A' && ch <= 'Z')
			host[i] = (char)(ch - 'A' + 'a');
		else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
			   ch == '.'))
			return false;
	}
	return strstr(host, "..") == NULL;
}

int broker_parse(const char *in, struct broker_req *r, const char **why)
{
	char host[SECRET_HOST_MAX + 8];

	memset(r, 0, sizeof(*r));
	if (!field(in, "protocol=", r->proto, sizeof(r->proto)) ||
	    (strcmp(r->proto, "https") != 0 && strcmp(r->proto, "http") != 0)) {
		*why = "only https and http credentials are served";
		return -1;
	}
	if (!field(in, "host=", host, sizeof(host)) || !host_name(host)) {
		*why = "no host, or not a DNS name";
		return -1;
	}
	snprintf(r->host, sizeof(r->host), "%s", host);
	if (!field(in, "username=", r->user, sizeof(r->user)) || strpbrk(r->user, "\r"))
		snprintf(r->user, sizeof(r->user), "%s", BROKER_USER);
	return 0;
}

static void out_text(struct broker_out *o, size_t size)
{
	o->text = secret_alloc(size);
	o->size = o->text ? size : 0;
	o->len = 0;
}

int broker_answer(const struct broker_req *r, const struct secret_value *v, struct broker_out *o,
		  const char **why)
{
	memset(o, 0, sizeof(*o));
	if (strpbrk(v->value, "\n\r")) {
		*why = "its value holds a line break";
		return -1;
	}
	out_text(o, sizeof("username=\npassword=\n\n") + strlen(r->user) + v->len);
	if (o->text)
		o->len = (size_t)snprintf(o->text, o->size, "username=%s\npassword=%s\n\n", r->user,
					  v->value);
	return 0;
}

void broker_refusal(struct broker_out *o, const char *why)
{
	out_text(o, sizeof("error=\n\n") + strlen(why));
	if (o->text)
		o->len = (size_t)snprintf(o->text, o->size, "error=%s\n\n", why);
}

void broker_out_free(struct broker_out *o)
{
	secret_free(o->text, o->size);
	memset(o, 0, sizeof(*o));
}
