/* A running sandbox's secrets, changed live (ctl.h: secret.set,
 * secret.rm), and its audit trail read (audit.tail). A secret from the
 * caller's environment comes as its request line and, right behind it,
 * "length" bytes of value: read as they arrive, without blocking the
 * loop, straight into the secret arena (what came with the line is moved
 * there and zeroed where it was). The new value is for the sessions that
 * start from then on; sandbox.json keeps the spec, never the value. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/ctl.h"
#include "sandbox/secrets.h"
#include "supervisor/supervisor_priv.h"

static void value_drop(struct client *c)
{
	secret_free(c->value, MAX(c->value_len, 1));
	c->value = NULL;
	c->value_len = c->value_got = 0;
	free(c->value_spec);
	c->value_spec = NULL;
}

static void answer(struct sup *s, struct client *c, gantry_error_t *err)
{
	client_answer(s, c, *err ? gantry_error_str(*err) : NULL);
	gantry_error_free(err);
}

/* Whether sandbox.json keeps what changed: a failure is logged, the live
 * change stands (it was asked for and made). */
static void save(struct sup *s)
{
	gantry_error_t err = NULL;

	if (sandbox_save(".", &s->sb, &err) < 0) {
		log_warn("a secret change is live but not saved: %s", gantry_error_str(err));
		gantry_error_free(&err);
	}
}

/* The value (NULL: a file or command source) has come: the store takes it. */
static void set_done(struct sup *s, struct client *c)
{
	gantry_error_t err = NULL;
	struct secret_spec sp;

	if (secret_spec_parse(c->value_spec, &sp, &err) == 0 && sup_egress_covers(s, &sp, &err) &&
	    secret_store_put(&s->secrets, c->value_spec, c->value, c->value_len, &err) == 0 &&
	    sandbox_secret_keep(&s->sb, c->value_spec, &err) == 0) {
		save(s);
		sup_egress_bindings(s);
		sup_audit(s, "secret.set", "ok", sp.name, NULL, "from %s",
			  secret_source_name(sp.source));
	} else if (sp.name[0]) {
		sup_audit(s, "secret.set", "refused", sp.name, NULL, "%s", gantry_error_str(err));
	}
	secret_spec_free(&sp);
	value_drop(c);
	answer(s, c, &err);
}

/* A refused secret.set: its value (length bytes, when it has one) is
 * still coming; those bytes are read and zeroed, never taken for the
 * next request. */
static void refused(struct sup *s, struct client *c, size_t end, json_t *length,
		    gantry_error_t *err)
{
	size_t rest = c->len - end - 1, n = length ? (size_t)json_integer_value(length) : 0;
	size_t take = MIN(rest, n);

	explicit_bzero(c->line + end + 1, take);
	memmove(c->line, c->line + end + 1 + take, rest - take);
	c->len = rest - take;
	explicit_bzero(c->line + c->len, end + 1 + take);
	c->discard = n - take;
	answer(s, c, err);
}

void ctl_secret_set(struct sup *s, struct client *c, json_t *req, size_t end)
{
	const char *spec = json_string_value(json_object_get(req, "spec"));
	json_t *length = json_object_get(req, "length");
	size_t rest = c->len - end - 1, take = 0;
	gantry_error_t err = NULL;
	struct secret_spec sp;

	if (length && (!json_is_integer(length) || json_integer_value(length) < 0)) {
		/* Where its value ends is not known: nothing after it is read. */
		client_reply(c, false, "secret.set: a bad length");
		client_drop(s, c);
		return;
	}
	if (spec == NULL || secret_spec_parse(spec, &sp, &err) < 0) {
		if (err == NULL)
			gantry_error(&err, 0, "secret.set: no spec");
		refused(s, c, end, length, &err);
		return;
	}
	if ((sp.source == SECRET_FROM_ENV) != json_is_integer(length))
		gantry_error(&err, 0, "secret `%s`: %s", sp.name,
			     length ? "a value comes only with a secret from the environment"
				    : "no length for its value");
	else if (length && (json_integer_value(length) < 0 ||
			    json_integer_value(length) > (json_int_t)SECRET_VALUE_MAX))
		gantry_error(&err, 0, "secret `%s`: its value is larger than %u KiB", sp.name,
			     SECRET_VALUE_MAX >> 10);
	if (err == NULL) {
		c->value_spec = secret_spec_format(&sp);
		c->value_len = length ? (size_t)json_integer_value(length) : 0;
	}
	if (err == NULL && length) {
		c->value = secret_alloc(MAX(c->value_len, 1));
		if (c->value == NULL)
			gantry_error(&err, ENOMEM, "secret `%s`: no room in the secret arena",
				     sp.name);
	}
	secret_spec_free(&sp);
	if (c->value) {
		take = MIN(rest, c->value_len);
		memcpy(c->value, c->line + end + 1, take);
		explicit_bzero(c->line + end + 1, take);
		c->value_got = take;
	}
	if (err) {
		value_drop(c);
		refused(s, c, end, length, &err);
		return;
	}
	/* The line and the value's bytes that came with it are used up. */
	memmove(c->line, c->line + end + 1 + take, rest - take);
	c->len = rest - take;
	explicit_bzero(c->line + c->len, end + 1 + take);
	if (c->value == NULL || c->value_got == c->value_len) {
		set_done(s, c);
	} else {
		c->deadline = now_ms() + SUP_REQUEST_MS; /* for the rest of the value */
	}
}

void client_secret_discard(struct sup *s, struct client *c)
{
	char buf[4096];
	ssize_t n = recv(c->fd, buf, MIN(sizeof(buf), c->discard), MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_drop(s, c);
		return;
	}
	explicit_bzero(buf, (size_t)n);
	c->discard -= (size_t)n;
}

void client_secret_value(struct sup *s, struct client *c)
{
	ssize_t n = recv(c->fd, c->value + c->value_got, c->value_len - c->value_got, MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_drop(s, c);
		return;
	}
	c->value_got += (size_t)n;
	if (c->value_got == c->value_len)
		set_done(s, c);
}

void ctl_secret_rm(struct sup *s, struct client *c, json_t *req, size_t end)
{
	const char *name = json_string_value(json_object_get(req, "name"));
	gantry_error_t err = NULL;

	client_line_done(c, end);
	if (name == NULL || !secret_name_valid(name, strlen(name))) {
		gantry_error(&err, 0, "secret.rm: no valid name");
	} else if (!sandbox_secret_drop(&s->sb, name) && !secret_store_has(&s->secrets, name)) {
		gantry_error(&err, 0, "sandbox `%s` has no secret `%s`", s->name, name);
	} else {
		secret_store_remove(&s->secrets, name);
		save(s);
		sup_egress_bindings(s);
		sup_audit(s, "secret.rm", "ok", name, NULL, NULL);
	}
	answer(s, c, &err);
}

void ctl_audit_tail(struct sup *s, struct client *c, json_t *req, size_t end)
{
	(void)req;
	client_line_done(c, end);
	client_reply_json(s, c, json_pack("{s:b,s:o}", "ok", 1, "events", sup_audit_json(s)));
}

void client_secret_free(struct client *c)
{
	value_drop(c);
}
