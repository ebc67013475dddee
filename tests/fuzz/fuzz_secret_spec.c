/* libFuzzer target for -secret specs (secret_spec_parse) and -secret-file
 * dotenvs (secret_dotenv_parse). A spec either fails with one line that
 * never quotes what follows its '=', or parses to a spec whose format
 * parses back to the same one. An input starting with a newline is a
 * dotenv: every line given is a valid name and a value inside the input,
 * without a newline or a NUL. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "secret/spec.h"

#include "check.h"

static void one_line(gantry_error_t *err)
{
	check(*err != NULL);
	check(strchr(gantry_error_str(*err), '\n') == NULL);
	gantry_error_free(err);
}

static bool marked(const char *v)
{
	if (strpbrk(v, "#$%^&*~|;{}[]<>?\\\"'"))
		return true;
	for (; *v; v++)
		if ((unsigned char)*v >= 0x80)
			return true;
	return false;
}

static void fuzz_spec(const char *s)
{
	gantry_error_t err = NULL;
	struct secret_spec sp, back;
	const char *eq = strchr(s, '=');
	char *canon, *again;

	if (secret_spec_parse(s, &sp, &err) < 0) {
		/* What follows a '=' may be a value typed by mistake. */
		/* What follows a '=' may be a value typed by mistake: one with a
		 * character no message or name holds is never quoted. */
		if (eq && strlen(eq + 1) >= 8 && strchr("@!", eq[1]) == NULL && marked(eq + 1))
			check(strstr(gantry_error_str(err), eq + 1) == NULL);
		one_line(&err);
		return;
	}
	check(secret_name_valid(sp.name, strlen(sp.name)));
	check(sp.nr_hosts <= SECRET_HOSTS_MAX && sp.hosts[sp.nr_hosts] == NULL);
	check(sp.source != SECRET_FROM_FILE || sp.path[0] == '/');
	check(sp.source != SECRET_FROM_CMD || (sp.argv[0] && sp.argv[0][0]));
	check(sp.source == SECRET_FROM_ENV || sp.source == SECRET_FROM_FILE ||
	      sp.source == SECRET_FROM_CMD);
	check(sp.ttl_ms >= -1 && sp.ttl_ms <= SECRET_TTL_MAX_MS);
	canon = secret_spec_format(&sp);
	check(secret_spec_parse(canon, &back, &err) == 0);
	check(strcmp(back.name, sp.name) == 0 && back.source == sp.source);
	check(back.nr_hosts == sp.nr_hosts && back.ttl_ms == sp.ttl_ms);
	again = secret_spec_format(&back);
	check(strcmp(again, canon) == 0);
	free(again);
	free(canon);
	secret_spec_free(&back);
	secret_spec_free(&sp);
}

struct walk {
	const char *buf;
	size_t len;
};

static int line(void *opaque, const char *name, size_t name_len, const char *value,
		size_t value_len, gantry_error_t *err)
{
	const struct walk *w = opaque;

	(void)err;
	check(secret_name_valid(name, name_len));
	check(name >= w->buf && name + name_len <= w->buf + w->len);
	check(value >= w->buf && value + value_len <= w->buf + w->len);
	check(memchr(value, '\n', value_len) == NULL && memchr(value, '\0', value_len) == NULL);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size && data[0] == '\n') {
		struct walk w = { (const char *)data + 1, size - 1 };
		gantry_error_t err = NULL;

		if (secret_dotenv_parse(w.buf, w.len, line, &w, &err) < 0)
			one_line(&err);
		return 0;
	}
	s = xmalloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_spec(s);
	free(s);
	return 0;
}
