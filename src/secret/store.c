/* A sandbox's secrets (see store.h); their sources are read by source.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"
#include "secret/source.h"
#include "secret/store.h"

void secret_store_init(struct secret_store *st)
{
	memset(st, 0, sizeof(*st));
	pthread_mutex_init(&st->lock, NULL);
	pthread_cond_init(&st->read, NULL);
}

static void entry_drop_value(struct secret_store *st, struct secret_entry *e)
{
	if (e->env)
		st->bytes -= e->env_size;
	secret_free(e->env, e->env_size);
	e->env = NULL;
	e->env_size = 0;
}

void secret_store_free(struct secret_store *st)
{
	for (size_t i = 0; i < st->n; i++) {
		entry_drop_value(st, &st->v[i]);
		secret_spec_free(&st->v[i].spec);
	}
	free(st->v);
	pthread_mutex_destroy(&st->lock);
	pthread_cond_destroy(&st->read);
	memset(st, 0, sizeof(*st));
}

/* Locked: e's value now NAME=VALUE from value (len bytes, no NUL). */
static int entry_set(struct secret_store *st, struct secret_entry *e, const char *value, size_t len,
		     gantry_error_t *err)
{
	size_t name_len = strlen(e->spec.name), size = name_len + 1 + len + 1;
	char *p;

	if (memchr(value, '\0', len))
		return gantry_error(err, 0, "secret `%s`: its value holds a NUL byte",
				    e->spec.name);
	if (st->bytes - (e->env ? e->env_size : 0) + size > SECRETS_BYTES_MAX)
		return gantry_error(err, 0, "secret `%s`: the secrets come to more than %u KiB",
				    e->spec.name, SECRETS_BYTES_MAX >> 10);
	p = secret_alloc(size);
	if (p == NULL)
		return gantry_error(err, ENOMEM, "secret `%s`: no room in the secret arena",
				    e->spec.name);
	memcpy(p, e->spec.name, name_len);
	p[name_len] = '=';
	memcpy(p + name_len + 1, value, len);
	p[size - 1] = '\0';
	entry_drop_value(st, e);
	e->env = p;
	e->env_size = size;
	e->fetched_ms = now_ms();
	st->bytes += size;
	return 0;
}

/* Locked: e's placeholder, when it is injected: the one the name had
 * (old, may be NULL), else a new one. */
static void entry_placeholder(struct secret_entry *e, const struct secret_entry *old)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[20];

	if (!e->spec.inject) {
		e->placeholder[0] = '\0';
		return;
	}
	if (old && old->placeholder[0]) {
		memcpy(e->placeholder, old->placeholder, sizeof(e->placeholder));
		return;
	}
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		abort(); /* a placeholder others could guess is worse than none */
	memcpy(e->placeholder, "gantry-", 7);
	for (size_t i = 0; i < sizeof(r); i++) {
		e->placeholder[7 + 2 * i] = hex[r[i] >> 4];
		e->placeholder[8 + 2 * i] = hex[r[i] & 15];
	}
	e->placeholder[SECRET_PLACEHOLDER_LEN] = '\0';
}

/* Locked: the entry named name, made (empty) when there is none. */
static struct secret_entry *entry_for(struct secret_store *st, const char *name,
				      gantry_error_t *err)
{
	for (size_t i = 0; i < st->n; i++)
		if (strcmp(st->v[i].spec.name, name) == 0)
			return &st->v[i];
	if (st->n == SECRETS_MAX) {
		gantry_error(err, 0, "more than %d secrets", SECRETS_MAX);
		return NULL;
	}
	st->v = xrealloc(st->v, (st->n + 1) * sizeof(*st->v));
	memset(&st->v[st->n], 0, sizeof(st->v[st->n]));
	return &st->v[st->n++];
}

/* The entry named name whose spec is now as text says (NULL: it is gone,
 * or was changed). */
static struct secret_entry *entry_again(struct secret_store *st, const char *text)
{
	for (size_t i = 0; i < st->n; i++) {
		cleanup_free char *now = NULL;

		if (strncmp(st->v[i].spec.name, text, strlen(st->v[i].spec.name)) != 0)
			continue;
		now = secret_spec_format(&st->v[i].spec);
		if (strcmp(now, text) == 0)
			return &st->v[i];
	}
	return NULL;
}

/* Locked: *pe's value, fetched again when its ttl has passed. A file is
 * read and a command run with the lock let go (another thread may use the
 * store meanwhile): *pe is then the entry found again, NULL when it was
 * removed or changed. A source that fails leaves no value behind. */
static int resolve(struct secret_store *st, struct secret_entry **pe, gantry_error_t *err)
{
	struct secret_entry *e = *pe;
	int64_t ttl = e->spec.ttl_ms;
	cleanup_free char *text = NULL;
	struct secret_spec copy;
	ssize_t n = -1;
	char *buf;
	int r;

	if (e->spec.source == SECRET_FROM_ENV || e->spec.source == SECRET_FROM_VALUE)
		return e->env ? 0 : gantry_error(err, 0, "secret `%s` has no value", e->spec.name);
	if (ttl < 0)
		ttl = e->spec.source == SECRET_FROM_FILE ? SECRET_FILE_TTL_MS : SECRET_CMD_TTL_MS;
	if (e->env && ttl > 0 && now_ms() - e->fetched_ms < (uint64_t)ttl)
		return 0;
	/* A command that just failed is not run again at once: a guest that
	 * keeps asking cannot keep one running. */
	if (e->spec.source == SECRET_FROM_CMD && e->failed_ms &&
	    now_ms() - e->failed_ms < SECRET_RETRY_MS)
		return gantry_error(err, 0, "secret `%s`: its command failed less than %d s ago",
				    e->spec.name, SECRET_RETRY_MS / 1000);
	text = secret_spec_format(&e->spec);
	/* One thread reads a source at a time; the others wait for it, then
	 * take its value, or read again when ttl=0 asks for every use. */
	while (e->reading) {
		pthread_cond_wait(&st->read, &st->lock);
		e = *pe = entry_again(st, text);
		if (e == NULL)
			return gantry_error(err, 0, "a secret changed while its source was read");
		if (e->env && ttl > 0 && now_ms() - e->fetched_ms < (uint64_t)ttl)
			return 0;
		if (!e->reading && e->env == NULL && e->failed_ms)
			return gantry_error(err, 0, "secret `%s`: its source failed just now",
					    e->spec.name);
	}
	if (secret_spec_parse(text, &copy, err) < 0)
		return -1;
	e->reading = true;
	buf = secret_alloc(SECRET_VALUE_MAX + 1);
	pthread_mutex_unlock(&st->lock);
	if (buf == NULL)
		gantry_error(err, ENOMEM, "secret `%s`: no room in the secret arena", copy.name);
	else
		n = copy.source == SECRET_FROM_FILE ? secret_read_file(&copy, buf, err)
						    : secret_run_cmd(&copy, buf, err);
	pthread_mutex_lock(&st->lock);
	e = *pe = entry_again(st, text);
	if (e)
		e->reading = false;
	pthread_cond_broadcast(&st->read);
	if (e == NULL) {
		r = n < 0 ? -1
			  : gantry_error(err, 0, "secret `%s` changed while its source was read",
					 copy.name);
	} else {
		r = n < 0 ? -1 : entry_set(st, e, buf, (size_t)n, err);
		e->failed_ms = r < 0 ? now_ms() : 0;
		if (r < 0)
			entry_drop_value(st, e);
	}
	secret_free(buf, SECRET_VALUE_MAX + 1);
	secret_spec_free(&copy);
	return r;
}

int secret_store_add(struct secret_store *st, const char *spec, const char *env_value,
		     gantry_error_t *err)
{
	struct secret_spec s;
	struct secret_entry *e;
	int r = -1;

	if (secret_spec_parse(spec, &s, err) < 0)
		return -1;
	if (s.source == SECRET_FROM_ENV && env_value == NULL) {
		gantry_error_usage(err, "secret `%s` is not set in this environment", s.name);
		secret_spec_free(&s);
		return -1;
	}
	pthread_mutex_lock(&st->lock);
	e = entry_for(st, s.name, err);
	if (e) {
		entry_drop_value(st, e);
		secret_spec_free(&e->spec);
		e->spec = s;
		e->failed_ms = 0;
		entry_placeholder(e, e);
		r = s.source == SECRET_FROM_ENV
			    ? entry_set(st, e, env_value, strlen(env_value), err)
			    : 0;
	} else {
		secret_spec_free(&s);
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

int secret_store_put(struct secret_store *st, const char *spec, const char *value, size_t len,
		     gantry_error_t *err)
{
	struct secret_entry e = { 0 }, *slot;
	int r = -1;

	if (secret_spec_parse(spec, &e.spec, err) < 0)
		return -1;
	if ((e.spec.source == SECRET_FROM_ENV) != (value != NULL)) {
		gantry_error_usage(err, "secret `%s`: %s", e.spec.name,
				   value ? "a value comes only with a secret from the environment"
					 : "no value came for it");
		secret_spec_free(&e.spec);
		return -1;
	}
	if (e.spec.source == SECRET_FROM_FILE) {
		/* Read before the lock: the store's users do not wait on it. */
		char *buf = secret_alloc(SECRET_VALUE_MAX + 1);
		ssize_t n =
			buf ? secret_read_file(&e.spec, buf, err)
			    : gantry_error(err, ENOMEM, "secret `%s`: no room in the secret arena",
					   e.spec.name);

		pthread_mutex_lock(&st->lock);
		r = n < 0 ? -1 : entry_set(st, &e, buf, (size_t)n, err);
		secret_free(buf, SECRET_VALUE_MAX + 1);
	} else {
		pthread_mutex_lock(&st->lock);
		/* A command runs when its value is first used. */
		r = value ? entry_set(st, &e, value, len, err) : 0;
	}
	slot = r == 0 ? entry_for(st, e.spec.name, err) : NULL;
	if (slot) {
		entry_placeholder(&e, slot);
		entry_drop_value(st, slot);
		secret_spec_free(&slot->spec);
		*slot = e;
	} else {
		entry_drop_value(st, &e);
		secret_spec_free(&e.spec);
		r = -1;
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

bool secret_store_remove(struct secret_store *st, const char *name)
{
	bool found = false;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && !found; i++) {
		if (strcmp(st->v[i].spec.name, name) != 0)
			continue;
		entry_drop_value(st, &st->v[i]);
		secret_spec_free(&st->v[i].spec);
		memmove(&st->v[i], &st->v[i + 1], (st->n - i - 1) * sizeof(st->v[i]));
		st->n--;
		found = true;
	}
	pthread_mutex_unlock(&st->lock);
	return found;
}

int secret_store_add_value(struct secret_store *st, const char *name, size_t name_len,
			   const char *value, size_t value_len, gantry_error_t *err)
{
	struct secret_entry *e;
	char key[SECRET_NAME_MAX + 1];
	int r = -1;

	if (!secret_name_valid(name, name_len))
		return gantry_error_usage(err, "invalid secret name");
	memcpy(key, name, name_len);
	key[name_len] = '\0';
	pthread_mutex_lock(&st->lock);
	e = entry_for(st, key, err);
	if (e) {
		entry_drop_value(st, e);
		secret_spec_free(&e->spec);
		memcpy(e->spec.name, key, name_len + 1);
		e->spec.source = SECRET_FROM_VALUE;
		e->spec.ttl_ms = -1;
		r = entry_set(st, e, value, value_len, err);
	}
	pthread_mutex_unlock(&st->lock);
	return r;
}

int secret_store_adopt(struct secret_store *st, const char *spec, gantry_error_t *err)
{
	struct secret_spec s;
	int r = 0;

	if (secret_spec_parse(spec, &s, err) < 0)
		return -1;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && r == 0; i++) {
		struct secret_entry *e = &st->v[i];

		if (strcmp(e->spec.name, s.name) != 0 || e->spec.source != SECRET_FROM_VALUE ||
		    s.source != SECRET_FROM_ENV)
			continue;
		secret_spec_free(&e->spec);
		e->spec = s;
		entry_placeholder(e, e);
		r = 1;
	}
	pthread_mutex_unlock(&st->lock);
	if (r == 0)
		secret_spec_free(&s);
	return r;
}

static int dotenv_line(void *opaque, const char *name, size_t name_len, const char *value,
		       size_t value_len, gantry_error_t *err)
{
	return secret_store_add_value(opaque, name, name_len, value, value_len, err);
}

int secret_store_add_dotenv(struct secret_store *st, const char *path, gantry_error_t *err)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat s;
	char *buf;
	ssize_t n;
	int r;

	if (fd < 0)
		return gantry_error_usage(err, "secret file `%s`: %s", path, strerror(errno));
	if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode))
		return gantry_error_usage(err, "secret file `%s` is not a regular file", path);
	if (s.st_size > SECRETS_BYTES_MAX)
		return gantry_error_usage(err, "secret file `%s` is larger than %u KiB", path,
					  SECRETS_BYTES_MAX >> 10);
	buf = secret_alloc((size_t)s.st_size + 1);
	if (buf == NULL)
		return gantry_error(err, ENOMEM, "secret file `%s`: no room in the secret arena",
				    path);
	do
		n = pread(fd, buf, (size_t)s.st_size, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		r = gantry_error_errno(err, "secret file `%s`", path);
	else
		r = secret_dotenv_parse(buf, (size_t)n, dotenv_line, st, err);
	secret_free(buf, (size_t)s.st_size + 1);
	return r < 0 ? gantry_error_prefix(err, "secret file `%s`", path) : 0;
}

bool secret_store_has(struct secret_store *st, const char *name)
{
	bool r = false;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && !r; i++)
		r = strcmp(st->v[i].spec.name, name) == 0;
	pthread_mutex_unlock(&st->lock);
	return r;
}

int secret_store_for_host(struct secret_store *st, const char *host,
			  bool (*match)(const char *pattern, const char *host),
			  struct secret_value *out, gantry_error_t *err)
{
	struct secret_entry *e = NULL;
	size_t name_len;
	int r;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && e == NULL; i++)
		for (size_t k = 0; !st->v[i].spec.inject && k < st->v[i].spec.nr_hosts && e == NULL;
		     k++)
			if (match(st->v[i].spec.hosts[k], host))
				e = &st->v[i];
	if (e == NULL) {
		pthread_mutex_unlock(&st->lock);
		return 0;
	}
	snprintf(out->name, sizeof(out->name), "%s", e->spec.name);
	r = resolve(st, &e, err);
	if (r == 0) {
		name_len = strlen(e->spec.name) + 1; /* and its '=' */
		out->len = e->env_size - name_len - 1;
		out->size = out->len + 1;
		out->value = secret_alloc(out->size);
		if (out->value == NULL)
			r = gantry_error(err, ENOMEM, "no room in the secret arena");
		else
			memcpy(out->value, e->env + name_len, out->len + 1);
	}
	pthread_mutex_unlock(&st->lock);
	return r < 0 ? -1 : 1;
}

void secret_value_free(struct secret_value *v)
{
	secret_free(v->value, v->size);
	v->value = NULL;
	v->len = v->size = 0;
}

bool secret_store_has_bound(struct secret_store *st)
{
	bool r = false;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && !r; i++)
		r = st->v[i].spec.nr_hosts > 0 && !st->v[i].spec.inject;
	pthread_mutex_unlock(&st->lock);
	return r;
}

bool secret_store_has_injected(struct secret_store *st)
{
	bool r = false;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && !r; i++)
		r = st->v[i].spec.inject;
	pthread_mutex_unlock(&st->lock);
	return r;
}

int secret_store_injected(struct secret_store *st, json_t **desc, char **block, size_t *size,
			  size_t *len, gantry_error_t *err)
{
	size_t total = 0;

	*desc = json_array();
	*block = NULL;
	*size = *len = 0;
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n; i++) {
		struct secret_entry *e = &st->v[i];
		gantry_error_t why = NULL;

		if (!e->spec.inject)
			continue;
		if (resolve(st, &e, &why) < 0)
			gantry_error_free(&why);
		else if (e)
			total += e->env_size;
	}
	if (total && (*block = secret_alloc(total)) == NULL) {
		pthread_mutex_unlock(&st->lock);
		json_decref(*desc);
		*desc = NULL;
		return gantry_error(err, ENOMEM, "no room in the secret arena");
	}
	*size = total;
	for (size_t i = 0; i < st->n; i++) {
		const struct secret_entry *e = &st->v[i];
		size_t name_len = strlen(e->spec.name) + 1, vlen;
		json_t *o;

		if (!e->spec.inject)
			continue;
		o = json_pack("{s:s,s:o,s:s}", "name", e->spec.name, "hosts",
			      jsonh_from_strv(e->spec.hosts, e->spec.nr_hosts), "placeholder",
			      e->placeholder);
		if (e->spec.header)
			json_object_set_new(o, "header", json_string(e->spec.header));
		if (e->spec.format)
			json_object_set_new(o, "format", json_string(e->spec.format));
		vlen = e->env ? e->env_size - name_len - 1 : 0;
		if (e->env == NULL || *len + vlen > total) {
			json_object_set_new(o, "error", json_string("its source failed"));
		} else {
			memcpy(*block + *len, e->env + name_len, vlen);
			*len += vlen;
			json_object_set_new(o, "length", json_integer((json_int_t)vlen));
		}
		json_array_append_new(*desc, o);
	}
	pthread_mutex_unlock(&st->lock);
	return 0;
}

char **secret_store_names(struct secret_store *st)
{
	char **v;

	pthread_mutex_lock(&st->lock);
	v = xzalloc((st->n + 1) * sizeof(*v));
	for (size_t i = 0; i < st->n; i++)
		v[i] = xstrdup(st->v[i].spec.name);
	pthread_mutex_unlock(&st->lock);
	return v;
}

int secret_store_env(struct secret_store *st, struct secret_env *out, gantry_error_t *err)
{
	size_t size = 0, at = 0, k = 0;
	int r = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && r == 0; i++) {
		struct secret_entry *e = &st->v[i];

		if (e->spec.nr_hosts == 0)
			r = resolve(st, &e, err);
		else if (e->spec.inject)
			size += strlen(e->spec.name) + 1 + SECRET_PLACEHOLDER_LEN + 1;
	}
	/* One set while a source was read may have no value yet: it is for
	 * the sessions after this one. */
	for (size_t i = 0; i < st->n && r == 0; i++)
		if (st->v[i].spec.nr_hosts == 0 && st->v[i].env)
			size += strlen(st->v[i].env) + 1;
	if (r == 0 && size) {
		out->block = secret_alloc(size);
		out->size = size;
		if (out->block == NULL)
			r = gantry_error(err, ENOMEM, "no room in the secret arena");
	}
	if (r == 0) {
		out->envp = xzalloc((st->n + 1) * sizeof(*out->envp));
		for (size_t i = 0; i < st->n && size; i++) {
			size_t len;

			if (st->v[i].spec.inject) {
				len = (size_t)sprintf(out->block + at, "%s=%s", st->v[i].spec.name,
						      st->v[i].placeholder) +
				      1;
				out->envp[k++] = out->block + at;
				at += len;
				continue;
			}
			if (st->v[i].spec.nr_hosts || st->v[i].env == NULL)
				continue;
			len = strlen(st->v[i].env) + 1;
			memcpy(out->block + at, st->v[i].env, len);
			out->envp[k++] = out->block + at;
			at += len;
		}
	}
	pthread_mutex_unlock(&st->lock);
	if (r < 0)
		secret_env_free(out);
	return r;
}

void secret_env_free(struct secret_env *e)
{
	secret_free(e->block, e->size);
	free(e->envp);
	memset(e, 0, sizeof(*e));
}

static int send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int secret_store_send(struct secret_store *st, int fd, gantry_error_t *err)
{
	uint16_t end = 0;
	int r = 0;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n && r == 0; i++) {
		const struct secret_entry *e = &st->v[i];
		uint16_t nl = (uint16_t)strlen(e->spec.name);
		uint32_t vl;

		if ((e->spec.source != SECRET_FROM_ENV && e->spec.source != SECRET_FROM_VALUE) ||
		    e->env == NULL)
			continue;
		vl = (uint32_t)strlen(e->env + nl + 1);
		if (send_all(fd, &nl, sizeof(nl)) < 0 || send_all(fd, e->spec.name, nl) < 0 ||
		    send_all(fd, &vl, sizeof(vl)) < 0 || send_all(fd, e->env + nl + 1, vl) < 0)
			r = gantry_error_errno(err, "hand the secrets over");
	}
	pthread_mutex_unlock(&st->lock);
	if (r == 0 && send_all(fd, &end, sizeof(end)) < 0)
		r = gantry_error_errno(err, "hand the secrets over");
	return r;
}

/* len bytes from fd by the deadline. */
static int recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;

	while (len) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ms();
		ssize_t n;

		if (now >= deadline) {
			errno = ETIMEDOUT;
			return -1;
		}
		if (poll(&pf, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -1;
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EPIPE;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int secret_store_recv(struct secret_store *st, int fd, int timeout_ms, gantry_error_t *err)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	size_t total = 0;

	for (size_t k = 0;; k++) {
		char name[SECRET_NAME_MAX + 1];
		uint16_t nl;
		uint32_t vl;
		char *v;
		int r;

		if (recv_all(fd, &nl, sizeof(nl), deadline) < 0)
			return gantry_error_errno(err, "take the secrets");
		if (nl == 0)
			return 0;
		if (k == SECRETS_MAX || nl > SECRET_NAME_MAX ||
		    recv_all(fd, name, nl, deadline) < 0 ||
		    recv_all(fd, &vl, sizeof(vl), deadline) < 0)
			return gantry_error(err, EPROTO, "take the secrets: a bad frame");
		if (vl > SECRETS_BYTES_MAX - total)
			return gantry_error(err, EPROTO, "take the secrets: more than %u KiB",
					    SECRETS_BYTES_MAX >> 10);
		total += vl;
		v = secret_alloc(vl + 1);
		if (v == NULL)
			return gantry_error(err, ENOMEM, "take the secrets: no room in the arena");
		r = recv_all(fd, v, vl, deadline) < 0
			    ? gantry_error(err, EPROTO, "take the secrets: cut short")
			    : secret_store_add_value(st, name, nl, v, vl, err);
		secret_free(v, vl + 1);
		if (r < 0)
			return -1;
	}
}
