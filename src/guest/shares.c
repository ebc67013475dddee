/* The gantry.share= parser (see shares.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/shares.h"
#include "proto/base64.h"

long shares_b64url_decode(const char *in, size_t len, char *out, size_t size)
{
	long n = size ? b64_decode(in, len, out, size - 1, B64_URL) : -1;

	if (n >= 0)
		out[n] = '\0';
	return n;
}

bool shares_tag_valid(const char *tag, size_t len)
{
	if (len == 0 || len > SHARE_TAG_MAX)
		return false;
	/* The source is <hub>/TAG: "." and ".." would be the hub or above it. */
	if ((len == 1 && tag[0] == '.') || (len == 2 && tag[0] == '.' && tag[1] == '.'))
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = tag[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

const char *shares_path_problem(const char *p, size_t len)
{
	bool named = false;

	if (len == 0 || p[0] != '/')
		return "not an absolute path";
	if (memchr(p, '\0', len) || memchr(p, '\n', len))
		return "holds a NUL or a newline";
	for (size_t i = 0; i < len;) {
		size_t n;

		while (i < len && p[i] == '/')
			i++;
		n = strcspn(p + i, "/");
		if (n == 2 && p[i] == '.' && p[i + 1] == '.')
			return "has a .. component";
		if (n && !(n == 1 && p[i] == '.'))
			named = true;
		i += n;
	}
	return named ? NULL : "is the container's root";
}

int shares_parse(const char *value, struct share *s, char why[SHARE_WHY_MAX])
{
	char path[SHARE_PATH_MAX + 1];
	const char *mode, *ctr, *problem;
	size_t tlen, clen;
	long n;

	mode = strchr(value, ':');
	tlen = mode ? (size_t)(mode - value) : strlen(value);
	if (!shares_tag_valid(value, tlen)) {
		snprintf(why, SHARE_WHY_MAX, "tag `%.*s`: want 1-%d of A-Za-z0-9._-, not . or ..",
			 (int)(tlen > 40 ? 40 : tlen), value, SHARE_TAG_MAX);
		return -1;
	}
	if (mode == NULL || (ctr = strchr(mode + 1, ':')) == NULL) {
		snprintf(why, SHARE_WHY_MAX, "want TAG:MODE:PATH");
		return -1;
	}
	if ((size_t)(ctr - mode - 1) != 2 ||
	    (strncmp(mode + 1, "ro", 2) != 0 && strncmp(mode + 1, "rw", 2) != 0)) {
		snprintf(why, SHARE_WHY_MAX, "mode `%.*s`: want ro or rw",
			 (int)(ctr - mode - 1 > 8 ? 8 : ctr - mode - 1), mode + 1);
		return -1;
	}
	ctr++;
	clen = strlen(ctr);
	n = shares_b64url_decode(ctr, clen, path, sizeof(path));
	if (n < 0) {
		snprintf(why, SHARE_WHY_MAX,
			 "path: not base64url without padding, or over %d bytes", SHARE_PATH_MAX);
		return -1;
	}
	if ((problem = shares_path_problem(path, (size_t)n)) != NULL) {
		snprintf(why, SHARE_WHY_MAX, "path: %s", problem);
		return -1;
	}
	s->path = strdup(path);
	if (s->path == NULL) {
		snprintf(why, SHARE_WHY_MAX, "%s", strerror(ENOMEM));
		return -1;
	}
	memcpy(s->tag, value, tlen);
	s->tag[tlen] = '\0';
	s->ro = mode[2] == 'o';
	return 0;
}

bool shares_add(struct shares *l, const char *value, char why[SHARE_WHY_MAX])
{
	if (l->n >= SHARES_MAX) {
		snprintf(why, SHARE_WHY_MAX, "more than %d shares", SHARES_MAX);
		return false;
	}
	if (shares_parse(value, &l->v[l->n], why) < 0)
		return false;
	l->n++;
	return true;
}

void shares_clear(struct shares *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].path);
		l->v[i].path = NULL;
	}
	l->n = 0;
}

bool tmpfs_add(struct tmpfs_mounts *l, const char *value, char why[SHARE_WHY_MAX])
{
	char path[SHARE_PATH_MAX + 1], *end;
	struct tmpfs_mount t = { 0 };
	const char *p = value, *problem;
	long n;

	if (l->n >= TMPFS_MAX) {
		snprintf(why, SHARE_WHY_MAX, "more than %d tmpfs mounts", TMPFS_MAX);
		return false;
	}
	for (; *p == 'r' || *p == 'x' || *p == '-'; p++) {
		t.ro = t.ro || *p == 'r';
		t.noexec = t.noexec || *p == 'x';
	}
	if (p == value || *p != ':')
		goto bad;
	errno = 0;
	t.size_kib = strtoull(p + 1, &end, 10);
	if (errno || end == p + 1 || *end != ':' || t.size_kib > (1ULL << 40))
		goto bad;
	p = end + 1;
	t.mode = (unsigned int)strtoul(p, &end, 8);
	if (end == p || *end != ':' || t.mode > 07777)
		goto bad;
	p = end + 1;
	n = shares_b64url_decode(p, strlen(p), path, sizeof(path));
	if (n < 0)
		goto bad;
	if ((problem = shares_path_problem(path, (size_t)n)) != NULL) {
		snprintf(why, SHARE_WHY_MAX, "path: %s", problem);
		return false;
	}
	t.path = strdup(path);
	if (t.path == NULL) {
		snprintf(why, SHARE_WHY_MAX, "%s", strerror(ENOMEM));
		return false;
	}
	l->v[l->n++] = t;
	return true;
bad:
	snprintf(why, SHARE_WHY_MAX, "want FLAGS:SIZE_KIB:MODE:PATH");
	return false;
}
