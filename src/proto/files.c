/* The host's reader of the file helper's records (proto/files.h). The
 * guest wrote them, so every field is checked against its bounds and its
 * alphabet before it is taken, and a record that is not exactly what the
 * header says ends the reading. libc only, like the rest of proto/. */
#include <string.h>

#include "proto/files.h"

#define FILES_LINE_MAX 192 /* the longest header line: 10 fields at their widest */

/* A decimal field of at most max digits (a leading '-' when neg may be),
 * up to its end at *p's next space or the line's end. */
static int number(const char **p, const char *end, bool neg, uint64_t max, uint64_t *v, bool *minus)
{
	const char *s = *p;
	uint64_t n = 0;

	*minus = false;
	if (neg && s < end && *s == '-')
		*minus = true, s++;
	if (s == end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (n > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		n = n * 10 + (uint64_t)(*s - '0');
	}
	*v = n;
	*p = s;
	return 0;
}

static int octal(const char **p, const char *end, uint32_t *v)
{
	const char *s = *p;
	uint32_t n = 0;

	if (s == end || *s < '0' || *s > '7')
		return -1;
	for (; s < end && *s >= '0' && *s <= '7'; s++) {
		n = n * 8 + (uint32_t)(*s - '0');
		if (n > 07777)
			return -1;
	}
	*v = n;
	*p = s;
	return 0;
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-';
}

/* "-" (none: "") or 1-32 of the name alphabet. */
static int name(const char **p, const char *end, char out[PROTO_FILES_NAME_MAX + 1])
{
	const char *s = *p;
	size_t n = 0;

	while (s + n < end && s[n] != ' ')
		n++;
	if (n == 1 && *s == '-') {
		*out = '\0';
	} else {
		if (n == 0 || n > PROTO_FILES_NAME_MAX)
			return -1;
		for (size_t i = 0; i < n; i++)
			if (!name_char(s[i]))
				return -1;
		memcpy(out, s, n);
		out[n] = '\0';
	}
	*p = s + n;
	return 0;
}

static int space(const char **p, const char *end)
{
	if (*p == end || **p != ' ')
		return -1;
	(*p)++;
	return 0;
}

/* The fields of an 'e' line after its kind, up to LEN. */
static int entry_fields(const char **p, const char *end, struct files_record *r)
{
	uint64_t v;
	bool minus;

	if (space(p, end) < 0 || *p == end)
		return -1;
	r->type = **p;
	if (r->type != 'f' && r->type != 'd' && r->type != 'l' && r->type != 'o')
		return -1;
	(*p)++;
	if (space(p, end) < 0 || number(p, end, false, UINT64_MAX, &r->size, &minus) < 0 ||
	    space(p, end) < 0 || octal(p, end, &r->mode) < 0 || space(p, end) < 0 ||
	    number(p, end, true, INT64_MAX, &v, &minus) < 0)
		return -1;
	r->mtime = minus ? -(int64_t)v : (int64_t)v;
	if (space(p, end) < 0 || number(p, end, false, UINT32_MAX, &v, &minus) < 0)
		return -1;
	r->uid = (uint32_t)v;
	if (space(p, end) < 0 || number(p, end, false, UINT32_MAX, &v, &minus) < 0)
		return -1;
	r->gid = (uint32_t)v;
	if (space(p, end) < 0 || name(p, end, r->owner) < 0 || space(p, end) < 0 ||
	    name(p, end, r->group) < 0)
		return -1;
	return 0;
}

/* The fields of a 'p' line after its kind, up to LEN. */
static int proc_fields(const char **p, const char *end, struct files_record *r)
{
	uint64_t v;
	bool minus;

	if (space(p, end) < 0 || number(p, end, false, UINT32_MAX, &v, &minus) < 0)
		return -1;
	r->pid = (uint32_t)v;
	if (space(p, end) < 0 || number(p, end, false, UINT32_MAX, &v, &minus) < 0)
		return -1;
	r->ppid = (uint32_t)v;
	if (space(p, end) < 0 || number(p, end, false, UINT32_MAX, &v, &minus) < 0)
		return -1;
	r->uid = (uint32_t)v;
	if (space(p, end) < 0 || *p == end ||
	    !((**p >= 'A' && **p <= 'Z') || (**p >= 'a' && **p <= 'z')))
		return -1;
	r->state = *(*p)++;
	if (space(p, end) < 0 || number(p, end, false, UINT64_MAX, &r->rss_kib, &minus) < 0)
		return -1;
	return 0;
}

int files_next(const char *buf, size_t len, size_t *off, struct files_record *rec, const char **why)
{
	const char *line = buf + *off, *nl, *p;
	size_t left = len - *off;
	uint64_t n;
	bool minus;

	memset(rec, 0, sizeof(*rec));
	if (left == 0)
		return 0;
	nl = memchr(line, '\n', left < FILES_LINE_MAX ? left : FILES_LINE_MAX);
	if (nl == NULL)
		return *why = "a record's line has no end", -1;
	p = line + 1;
	rec->kind = *line;
	if (rec->kind == 'e') {
		if (entry_fields(&p, nl, rec) < 0)
			return *why = "an entry's fields are malformed", -1;
	} else if (rec->kind == 'w') {
		if (space(&p, nl) < 0 || p == nl || strchr("cwrma", *p) == NULL || *p == '\0')
			return *why = "a change's type is malformed", -1;
		rec->type = *p++;
	} else if (rec->kind == 'p') {
		if (proc_fields(&p, nl, rec) < 0)
			return *why = "a process's fields are malformed", -1;
	} else if (rec->kind != 'x' && rec->kind != 'n' && rec->kind != 'y') {
		return *why = "an unknown record", -1;
	}
	if (space(&p, nl) < 0 || number(&p, nl, false, PROTO_FILES_PATH_MAX, &n, &minus) < 0 ||
	    p != nl || n == 0)
		return *why = "a record's path length is malformed", -1;
	p = nl + 1;
	if ((size_t)(buf + len - p) < n + 1 || p[n] != '\n')
		return *why = "a record's path is cut short", -1;
	if (memchr(p, '\0', n))
		return *why = "a record's path holds a NUL", -1;
	rec->path = p;
	rec->path_len = n;
	*off = (size_t)(p + n + 1 - buf);
	return 1;
}

ssize_t files_record_len(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len < FILES_LINE_MAX ? len : FILES_LINE_MAX), *last;
	uint64_t n;
	bool minus;

	if (nl == NULL)
		return len < FILES_LINE_MAX ? 0 : -1;
	/* LEN is the line's last field. */
	for (last = nl; last > buf && last[-1] != ' '; last--)
		;
	if (last == buf || number(&last, nl, false, PROTO_FILES_PATH_MAX, &n, &minus) < 0 ||
	    last != nl)
		return -1;
	return (size_t)(nl + 1 - buf) + n + 1 <= len ? (ssize_t)((size_t)(nl + 1 - buf) + n + 1)
						     : 0;
}
