/* A sandbox's secrets on their way to its supervisor (see secrets.h). */
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "sandbox/secrets.h"

int sandbox_secrets_check(struct secret_store *st, gantry_error_t *err)
{
	int r = 0;

	if (st == NULL)
		return 0;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && r == 0; i++)
		if (st->v[i].spec.nr_hosts)
			r = gantry_error_usage(
				err,
				"secret `%s`: host-bound secrets (NAME@HOST) are not "
				"served yet; without @HOST it goes into the processes' "
				"environment",
				st->v[i].spec.name);
	pthread_mutex_unlock(&st->lock);
	return r;
}

/* A sandbox's secrets as kept: specs without values. Their sources are
 * read by its supervisor as it starts (one that fails fails the start),
 * not here too: a command would run twice. */
int sandbox_secrets_describe(struct secret_store *st, struct sandbox *sb, gantry_error_t *err)
{
	if (st == NULL)
		return 0;
	if (sandbox_secrets_check(st, err) < 0)
		return -1;
	pthread_mutex_lock(&st->lock);
	sb->secrets = xzalloc((st->n + 1) * sizeof(*sb->secrets));
	for (size_t i = 0; i < st->n; i++)
		sb->secrets[sb->nr_secrets++] = secret_spec_format(&st->v[i].spec);
	pthread_mutex_unlock(&st->lock);
	return 0;
}

void sandbox_secrets_free(struct secret_store **st)
{
	if (*st) {
		secret_store_free(*st);
		free(*st);
		*st = NULL;
	}
}

/* The values of sb's secrets from the environment, from env (NULL in
 * *out when it has none); -1 when one is not set there. */
int sandbox_secrets_from_env(const struct sandbox *sb, sandbox_env_fn env,
			     struct secret_store **out, gantry_error_t *err)
{
	struct secret_store *st = xzalloc(sizeof(*st));
	int r = 0;

	secret_store_init(st);
	for (size_t i = 0; i < sb->nr_secrets && r == 0; i++) {
		struct secret_spec s;
		const char *v;

		if (secret_spec_parse(sb->secrets[i], &s, err) < 0) {
			r = -1;
			break;
		}
		v = s.source == SECRET_FROM_ENV && env ? env(s.name) : NULL;
		if (s.source == SECRET_FROM_ENV && v == NULL)
			r = gantry_error(err, 0,
					 "secret `%s` is not set in this environment: a resume "
					 "takes it from there, as the start did",
					 s.name);
		else if (v)
			r = secret_store_add_value(st, s.name, strlen(s.name), v, strlen(v), err);
		secret_spec_free(&s);
	}
	if (r < 0 || st->n == 0)
		sandbox_secrets_free(&st);
	*out = st;
	return r;
}
