/* base64 (RFC 4648), both spellings Gantry uses: the standard alphabet
 * padded with '=' (section 4: HTTP Basic credentials) and base64url
 * without padding (section 5: share paths on the guest's kernel command
 * line, gantry.share=). Header-only, as gantry-init links none of the
 * host's code. */
#ifndef GANTRY_PROTO_BASE64_H
#define GANTRY_PROTO_BASE64_H

#include <stddef.h>
#include <stdint.h>

enum b64_kind {
	B64_PADDED, /* A-Z a-z 0-9 + /, '=' to a multiple of 4 */
	B64_URL,    /* A-Z a-z 0-9 - _, no padding */
};

/* The characters of n bytes encoded (without the NUL). */
static inline size_t b64_encoded_len(size_t n, enum b64_kind k)
{
	if (k == B64_PADDED)
		return (n + 2) / 3 * 4;
	return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

static inline char b64_char(unsigned int v, enum b64_kind k)
{
	static const char std[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	return v == 62 && k == B64_URL ? '-' : v == 63 && k == B64_URL ? '_' : std[v & 63];
}

/* The value of c, or -1. */
static inline int b64_value(unsigned char c, enum b64_kind k)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == (k == B64_URL ? '-' : '+'))
		return 62;
	if (c == (k == B64_URL ? '_' : '/'))
		return 63;
	return -1;
}

/* n bytes of in into out (b64_encoded_len + 1 bytes), NUL-terminated. */
static inline void b64_encode(const void *in, size_t n, char *out, enum b64_kind k)
{
	const unsigned char *p = in;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		size_t left = n - i;
		uint32_t v = (uint32_t)p[i] << 16 | (left > 1 ? (uint32_t)p[i + 1] << 8 : 0) |
			     (left > 2 ? p[i + 2] : 0);

		out[o++] = b64_char(v >> 18, k);
		out[o++] = b64_char(v >> 12 & 63, k);
		if (left > 1 || k == B64_PADDED)
			out[o++] = left > 1 ? b64_char(v >> 6 & 63, k) : '=';
		if (left > 2 || k == B64_PADDED)
			out[o++] = left > 2 ? b64_char(v & 63, k) : '=';
	}
	out[o] = '\0';
}

/* Decode n characters of in into out (at most size bytes): how many
 * bytes, or -1 when in is not of that kind or out is too small. Padded:
 * a multiple of 4, '=' only as the last one or two. Unpadded: never 1 past
 * a multiple of 4, and the bits past the last byte zero (one spelling per
 * value). No NUL is written. */
static inline long b64_decode(const char *in, size_t n, void *out, size_t size, enum b64_kind k)
{
	unsigned char *p = out;
	unsigned int acc = 0, bits = 0;
	size_t o = 0, pad = 0;

	if (k == B64_PADDED ? n % 4 != 0 : n % 4 == 1)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int v = b64_value((unsigned char)in[i], k);

		if (k == B64_PADDED && in[i] == '=' && i + 2 >= n &&
		    (i + 1 == n || in[i + 1] == '=')) {
			pad++;
			continue;
		}
		if (v < 0 || pad)
			return -1;
		acc = (acc << 6 | (unsigned int)v) & 0xfff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o == size)
				return -1;
			p[o++] = (unsigned char)(acc >> bits);
		}
	}
	if (k == B64_URL && (acc & ((1u << bits) - 1)))
		return -1;
	return (long)o;
}

#endif
