/* Secret specs and dotenv files (see spec.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"
#include "secret/spec.h"

#define FORMAT_MAX 256

/* A header's name as HTTP has it (a token), at most SECRET_HEADER_MAX. */
static bool header_valid(const char *h, size_t len)
{
	if (len == 0 || len > SECRET_HEADER_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!(h[i] >= 'A' && h[i] <= 'Z') && !(h[i] >= 'a' && h[i] <= 'z') &&
		    !(h[i] >= '0' && h[i] <= '9') && !strchr("!#$%&'*+-.^_`|~", h[i]))
			return false;
	return true;
}

/* A format: printable, one %s and no other %, at most FORMAT_MAX. */
static bool format_valid(const char *f, size_t len)
{
	const char *s = memmem(f, len, "%s", 2);

	if (len == 0 || len > FORMAT_MAX || s == NULL)
		return false;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)f[i] < 0x20 || (unsigned char)f[i] >= 0x7f ||
		    (f[i] == '%' && f + i != s))
			return false;
	return true;
}

bool secret_name_valid(const char *name, size_t len)
{
	if (len == 0 || len > SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return false;
	}
	return true;
}

/* A lowercase DNS name, or *. and one: labels of 1-63 of a-z 0-9 -, not
 * starting or ending with -, at most 253 in all. */
static bool host_valid(const char *h, size_t len)
{
	size_t label = 0;

	if (len >= 2 && h[0] == '*' && h[1] == '.') {
		h += 2;
		len -= 2;
	}
	if (len == 0 || len > SECRET_HOST_MAX)
		return false;
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? h[i] : '.';

		if (c == '.') {
			if (label == 0 || label > 63 || h[i - 1] == '-' || h[i - label] == '-')
				return false;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
			label++;
		} else {
			return false;
		}
	}
	return true;
}

/* One unit of a Go duration, in nanoseconds; 0: none. */
static long double unit_ns(const char *u, size_t n)
{
	static const struct {
		const char *name;
		long double ns;
	} units[] = {
		{ "ns", 1 },   { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "\xce\xbcs", 1e3 },
		{ "ms", 1e6 }, { "s", 1e9 },  { "m", 60e9 },	    { "h", 3600e9 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(units); i++)
		if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0)
			return units[i].ns;
	return 0;
}

int secret_ttl_parse(const char *s, size_t len, int64_t *ms)
{
	long double total = 0;
	size_t i = 0;

	if (len == 1 && s[0] == '0') {
		*ms = 0;
		return 0;
	}
	if (len == 0 || len > 64)
		return -1;
	while (i < len) {
		long double v = 0, scale = 1, per;
		bool digits = false;
		size_t u;

		for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits = true)
			v = v * 10 + (s[i] - '0');
		if (i < len && s[i] == '.') {
			for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, digits = true)
				v += (s[i] - '0') * (scale /= 10);
		}
		if (!digits)
			return -1;
		for (u = i; i < len && !(s[i] >= '0' && s[i] <= '9') && s[i] != '.'; i++)
			;
		per = unit_ns(s + u, i - u);
		if (per == 0)
			return -1;
		total += v * per;
		if (total / 1e6 > (long double)SECRET_TTL_MAX_MS)
			return -1;
	}
	*ms = (int64_t)(total / 1e6);
	return 0;
}

void secret_spec_free(struct secret_spec *s)
{
	for (size_t i = 0; i < s->nr_hosts; i++)
		free(s->hosts[i]);
	free(s->path);
	free(s->header);
	free(s->format);
	strv_free(s->argv);
	memset(s, 0, sizeof(*s));
}

static int hosts_parse(struct secret_spec *s, const char *h, size_t len, gantry_error_t *err)
{
	for (size_t at = 0; at <= len;) {
		const char *comma = memchr(h + at, ',', len - at);
		size_t n = comma ? (size_t)(comma - (h + at)) : len - at;

		if (!host_valid(h + at, n))
			return gantry_error_usage(
				err,
				"secret `%s`: host %zu is not a lowercase DNS name "
				"(or *.name)",
				s->name, s->nr_hosts + 1);
		if (s->nr_hosts == SECRET_HOSTS_MAX)
			return gantry_error_usage(err, "secret `%s`: more than %d hosts", s->name,
						  SECRET_HOSTS_MAX);
		s->hosts[s->nr_hosts++] = xstrndup(h + at, n);
		at += n + 1;
	}
	return 0;
}

static int argv_parse(struct secret_spec *s, const char *cmd, gantry_error_t *err)
{
	size_t n = 0;

	s->argv = xzalloc((SECRET_ARGV_MAX + 1) * sizeof(*s->argv));
	for (const char *p = cmd;;) {
		size_t len;

		p += strspn(p, " \t");
		if (*p == '\0')
			break;
		if (n == SECRET_ARGV_MAX)
			return gantry_error_usage(err,
						  "secret `%s`: a command of more than %d words",
						  s->name, SECRET_ARGV_MAX);
		len = strcspn(p, " \t");
		s->argv[n++] = xstrndup(p, len);
		p += len;
	}
	if (n == 0)
		return gantry_error_usage(err, "secret `%s`: ='!' needs a command", s->name);
	return 0;
}

/* What follows NAME[@HOSTS]=. */
static int source_parse(struct secret_spec *s, const char *src, gantry_error_t *err)
{
	if (src[0] == '@') {
		if (src[1] != '/')
			return gantry_error_usage(err, "secret `%s`: =@ needs an absolute path",
						  s->name);
		if (strlen(src + 1) >= PATH_MAX)
			return gantry_error_usage(err, "secret `%s`: path too long", s->name);
		s->source = SECRET_FROM_FILE;
		s->path = xstrdup(src + 1);
		return 0;
	}
	if (src[0] == '!') {
		s->source = SECRET_FROM_CMD;
		return argv_parse(s, src + 1, err);
	}
	return gantry_error_usage(
		err,
		"secret `%s`: NAME=VALUE would put the value in the command line, "
		"which every user of this host can read: give %s alone (from the "
		"environment), %s=@FILE, %s='!COMMAND' or a file of secrets",
		s->name, s->name, s->name, s->name);
}

/* The options at the end of a spec, each after a comma, in any order:
 * ttl=DUR, inject, header=NAME, format=TEXT. Taken off the end of rest
 * one at a time, so hosts and sources before them keep their commas. */
static int options_parse(struct secret_spec *s, char *rest, gantry_error_t *err)
{
	char *comma;

	while ((comma = strrchr(rest, ','))) {
		char *o = comma + 1;

		/* Blanks after it too: a command's words drop them, and
		 * `!cmd x,inject ` must not format as `!cmd x,inject`. */
		if (strncmp(o, "inject", 6) == 0 && o[6 + strspn(o + 6, " \t")] == '\0') {
			s->inject = true;
		} else if (strncmp(o, "ttl=", 4) == 0) {
			if (s->ttl_ms >= 0 ||
			    secret_ttl_parse(o + 4, strlen(o + 4), &s->ttl_ms) < 0)
				return gantry_error_usage(
					err,
					"secret `%s`: ttl is not a duration (90s, "
					"1m30s, 0)",
					s->name);
		} else if (strncmp(o, "header=", 7) == 0) {
			if (s->header || !header_valid(o + 7, strlen(o + 7)))
				return gantry_error_usage(err,
							  "secret `%s`: header= needs one HTTP "
							  "header name",
							  s->name);
			s->header = xstrdup(o + 7);
			s->inject = true;
		} else if (strncmp(o, "format=", 7) == 0) {
			if (s->format || !format_valid(o + 7, strlen(o + 7)))
				return gantry_error_usage(
					err,
					"secret `%s`: format= needs printable text "
					"with one %%s and no other %% (at most %d)",
					s->name, FORMAT_MAX);
			s->format = xstrdup(o + 7);
			s->inject = true;
		} else {
			break;
		}
		*comma = '\0';
	}
	return 0;
}

static int parse(const char *spec, struct secret_spec *s, gantry_error_t *err)
{
	cleanup_free char *copy = NULL;
	size_t len = strlen(spec), name_len;
	char *rest, *eq;

	if (len == 0)
		return gantry_error_usage(err, "empty secret spec");
	/* (A little over, for a spec this code formatted: its ttl in ms.) */
	if (len > SECRET_SPEC_MAX + 32)
		return gantry_error_usage(err, "secret spec longer than %d bytes", SECRET_SPEC_MAX);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)spec[i] < 0x20 || spec[i] == 0x7f)
			return gantry_error_usage(err, "secret spec with a control character");
	name_len = strspn(spec, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_");
	if (!secret_name_valid(spec, name_len) ||
	    (spec[name_len] && !strchr("@=,", spec[name_len])))
		return gantry_error_usage(err, "invalid secret name: use [A-Za-z_][A-Za-z0-9_]* "
					       "(at most 128)");
	memcpy(s->name, spec, name_len);
	copy = xstrdup(spec + name_len);
	if (options_parse(s, copy, err) < 0)
		return -1;
	rest = copy;
	eq = strchr(rest, '=');
	if (eq)
		*eq = '\0';
	if (rest[0] == '@' && hosts_parse(s, rest + 1, strlen(rest + 1), err) < 0)
		return -1;
	if (rest[0] != '\0' && rest[0] != '@')
		return gantry_error_usage(err, "secret `%s`: unexpected `%c` after the name",
					  s->name, rest[0]);
	if (eq && source_parse(s, eq + 1, err) < 0)
		return -1;
	if (s->ttl_ms >= 0 && s->source == SECRET_FROM_ENV)
		return gantry_error_usage(err, "secret `%s`: ttl needs =@FILE or ='!COMMAND'",
					  s->name);
	if (s->format && !s->header)
		return gantry_error_usage(err, "secret `%s`: format= needs header=", s->name);
	if (s->inject && s->nr_hosts == 0)
		return gantry_error_usage(err,
					  "secret `%s`: an injected secret needs the hosts it goes "
					  "to (NAME@HOST,inject)",
					  s->name);
	for (size_t i = 0; s->inject && i < s->nr_hosts; i++)
		if (s->hosts[i][0] == '*')
			return gantry_error_usage(err,
						  "secret `%s`: an injected secret names each host "
						  "(no *.name)",
						  s->name);
	return 0;
}

int secret_spec_parse(const char *spec, struct secret_spec *out, gantry_error_t *err)
{
	memset(out, 0, sizeof(*out));
	out->ttl_ms = -1;
	if (parse(spec, out, err) == 0)
		return 0;
	secret_spec_free(out);
	return -1;
}

const char *secret_source_name(enum secret_source source)
{
	switch (source) {
	case SECRET_FROM_FILE:
		return "file";
	case SECRET_FROM_CMD:
		return "command";
	case SECRET_FROM_ENV:
	case SECRET_FROM_VALUE:
	default:
		return "env";
	}
}

size_t secret_spec_name_len(const char *spec)
{
	return strcspn(spec, "@=,");
}

char *secret_spec_format(const struct secret_spec *s)
{
	size_t cap = SECRET_SPEC_MAX + 64, len;
	char *out = xmalloc(cap);

	len = (size_t)snprintf(out, cap, "%s", s->name);
	for (size_t i = 0; i < s->nr_hosts && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%c%s", i ? ',' : '@', s->hosts[i]);
	if (s->source == SECRET_FROM_FILE && len < cap)
		len += (size_t)snprintf(out + len, cap - len, "=@%s", s->path);
	if (s->source == SECRET_FROM_CMD)
		for (size_t i = 0; s->argv[i] && len < cap; i++)
			len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "=!",
						s->argv[i]);
	if (s->inject && len < cap)
		len += (size_t)snprintf(out + len, cap - len, ",inject");
	if (s->header && len < cap)
		len += (size_t)snprintf(out + len, cap - len, ",header=%s", s->header);
	if (s->format && len < cap)
		len += (size_t)snprintf(out + len, cap - len, ",format=%s", s->format);
	if (s->ttl_ms >= 0 && len < cap) {
		/* In its largest whole unit: 0, 90s, 5m, 1500ms. */
		static const struct {
			int64_t ms;
			const char *unit;
		} units[] = { { 3600000, "h" }, { 60000, "m" }, { 1000, "s" }, { 1, "ms" } };
		size_t u = 0;

		while (s->ttl_ms && s->ttl_ms % units[u].ms)
			u++;
		if (s->ttl_ms == 0)
			snprintf(out + len, cap - len, ",ttl=0");
		else
			snprintf(out + len, cap - len, ",ttl=%lld%s",
				 (long long)(s->ttl_ms / units[u].ms), units[u].unit);
	}
	return out;
}

int secret_dotenv_parse(const char *buf, size_t len,
			int (*fn)(void *opaque, const char *name, size_t name_len,
				  const char *value, size_t value_len, gantry_error_t *err),
			void *opaque, gantry_error_t *err)
{
	size_t line = 0;

	for (size_t at = 0; at < len;) {
		const char *p = buf + at, *nl = memchr(p, '\n', len - at), *eq, *v;
		size_t n = nl ? (size_t)(nl - p) : len - at, name_len, vlen;
		int r;

		at += n + (nl != NULL);
		line++;
		if (n && p[n - 1] == '\r')
			n--;
		while (n && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		if (n == 0 || *p == '#')
			continue;
		eq = memchr(p, '=', n);
		if (eq == NULL)
			return gantry_error_usage(err, "line %zu: no `=` (NAME=VALUE)", line);
		name_len = (size_t)(eq - p);
		if (!secret_name_valid(p, name_len))
			return gantry_error_usage(err, "line %zu: invalid name", line);
		v = eq + 1;
		vlen = n - name_len - 1;
		if (memchr(v, '\0', vlen))
			return gantry_error_usage(err, "line %zu: a NUL in the value", line);
		if (vlen >= 2 && (v[0] == '"' || v[0] == '\'') && v[vlen - 1] == v[0]) {
			v++;
			vlen -= 2;
		}
		r = fn(opaque, p, name_len, v, vlen, err);
		if (r < 0)
			return r;
	}
	return 0;
}
