/* Sanitising untrusted text (see text.h). */
/* No other Gantry code: gantry-init links it with the protocol codec. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"

/* Length of the valid UTF-8 sequence at p, or 0 (no overlong forms, no
 * surrogates, nothing above U+10FFFF, as jansson judges). */
static size_t utf8_len(const unsigned char *p, uint32_t *cp_out)
{
	uint32_t cp;
	size_t n;

	if (p[0] < 0x80) {
		*cp_out = p[0];
		return 1;
	}
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4, cp = p[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*cp_out = cp;
	return n;
}

static char *sanitize(char *s, size_t max, bool keep_newlines)
{
	unsigned char *p = (unsigned char *)s, *out = p;

	while (*p) {
		uint32_t cp = 0;
		size_t n = utf8_len(p, &cp);

		if (n == 1 && cp == '\n' && keep_newlines) {
			*out++ = *p++;
		} else if (n == 0 || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f)) {
			*out++ = '?';
			p += n ? n : 1;
		} else {
			memmove(out, p, n);
			out += n;
			p += n;
		}
	}
	*out = '\0';
	if (max >= 4 && (size_t)(out - (unsigned char *)s) > max) {
		size_t cut = max - 3;

		/* Cut on a character boundary. */
		while (cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80)
			cut--;
		strcpy(s + cut, "...");
	}
	return s;
}

char *text_sanitize(char *s, size_t max)
{
	return sanitize(s, max, false);
}

char *text_sanitize_lines(char *s, size_t max)
{
	return sanitize(s, max, true);
}

char *text_sanitize_utf8(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		uint32_t cp;
		size_t n = utf8_len(p, &cp);

		if (n == 0)
			*p++ = '?';
		else
			p += n;
	}
	return s;
}

char *text_utf8_replaced(const void *buf, size_t len, size_t *out_len)
{
	/* Read from a NUL-terminated copy, so a sequence cut at the end stops
	 * at that NUL (no continuation byte). */
	char *in = malloc(len + 1), *out = malloc(len * 3 + 1);
	size_t i = 0, o = 0;

	if (in == NULL || out == NULL)
		abort();
	memcpy(in, buf, len);
	in[len] = '\0';
	while (i < len) {
		uint32_t cp;
		size_t n = utf8_len((const unsigned char *)in + i, &cp);

		if (n == 0) {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			memcpy(out + o, in + i, n);
			o += n;
			i += n;
		}
	}
	out[o] = '\0';
	free(in);
	*out_len = o;
	return out;
}

char *text_sanitized(const void *buf, size_t len, size_t max)
{
	char *s = malloc(len + 1);

	if (s == NULL) {
		fputs("gantry: out of memory\n", stderr);
		abort();
	}

	memcpy(s, buf, len);
	s[len] = '\0';
	for (size_t i = 0; i < len; i++)
		if (s[i] == '\0')
			s[i] = '?';
	return text_sanitize(s, max);
}
