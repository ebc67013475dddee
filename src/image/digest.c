/* sha256 digests and verified blob streams (see digest.h). */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "image/digest.h"
#include "image/lazylib.h"

bool digest_valid(const char *d)
{
	size_t n = strlen(DIGEST_PREFIX);

	if (d == NULL || strncmp(d, DIGEST_PREFIX, n) != 0 || strlen(d) != n + DIGEST_HEX_LEN)
		return false;
	for (const char *p = d + n; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

const char *digest_hex(const char *d)
{
	return d + strlen(DIGEST_PREFIX);
}

int digest_check(const char *d, gantry_error_t *err)
{
	const char *colon;

	if (digest_valid(d))
		return 0;
	if (d == NULL)
		return gantry_error(err, 0, "missing digest");
	colon = strchr(d, ':');
	if (colon && strncmp(d, DIGEST_PREFIX, strlen(DIGEST_PREFIX)) != 0)
		return gantry_error(err, 0, "digest `%.80s`: only sha256 is supported", d);
	return gantry_error(err, 0, "malformed digest `%.80s`", d);
}

void sha256_init(struct sha256 *h)
{
	/* Not loaded: sha256_final says why. */
	h->ctx = lazy_crypto(NULL) == 0 ? sym_EVP_MD_CTX_new() : NULL;
	h->failed = h->ctx == NULL || sym_EVP_DigestInit_ex(h->ctx, sym_EVP_sha256(), NULL) != 1;
}

void sha256_update(struct sha256 *h, const void *p, size_t n)
{
	if (!h->failed && n && sym_EVP_DigestUpdate(h->ctx, p, n) != 1)
		h->failed = true;
}

int sha256_final(struct sha256 *h, char out[DIGEST_STR_MAX], gantry_error_t *err)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	char *p = out + strlen(DIGEST_PREFIX);

	out[0] = '\0';
	if (lazy_crypto(err) < 0) {
		sha256_release(h);
		return -1;
	}
	if (h->failed || sym_EVP_DigestFinal_ex(h->ctx, md, &len) != 1 || len != DIGEST_HEX_LEN / 2) {
		sha256_release(h);
		return gantry_error(err, EIO, "libcrypto cannot compute sha256 (out of memory, or "
					      "its configuration leaves sha256 out)");
	}
	memcpy(out, DIGEST_PREFIX, strlen(DIGEST_PREFIX));
	for (unsigned int i = 0; i < len; i++, p += 2)
		snprintf(p, 3, "%02x", md[i]);
	sha256_release(h);
	return 0;
}

void sha256_release(struct sha256 *h)
{
	if (h->ctx)
		sym_EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

int sha256_buf(const void *p, size_t n, char out[DIGEST_STR_MAX], gantry_error_t *err)
{
	struct sha256 h;

	sha256_init(&h);
	sha256_update(&h, p, n);
	return sha256_final(&h, out, err);
}

void blob_init(struct blob *b, const char *label, const char *digest, int64_t size,
	       blob_pull_fn pull, void *arg)
{
	*b = (struct blob){ .pull = pull, .arg = arg, .label = xstrdup(label), .size = size };
	if (digest)
		snprintf(b->digest, sizeof(b->digest), "%s", digest);
	sha256_init(&b->hash);
}

void blob_release(struct blob *b)
{
	sha256_release(&b->hash);
	gantry_error_free(&b->err);
	free(b->label);
	b->label = NULL;
}

ssize_t blob_read(struct blob *b, const void **buf)
{
	ssize_t n;

	if (b->err)
		return -1;
	if (b->eof)
		return 0;
	n = b->pull(b->arg, buf, &b->err);
	if (n < 0) {
		gantry_error(&b->err, 0, "read failed"); /* a source that set nothing */
		gantry_error_prefix(&b->err, "%s", b->label);
		return -1;
	}
	if (n == 0) {
		b->eof = true;
		return 0;
	}
	if (b->size >= 0 && (uint64_t)n > (uint64_t)b->size - MIN(b->got, (uint64_t)b->size))
		return gantry_error(&b->err, 0, "%s: more than the %lld bytes its descriptor says",
				    b->label, (long long)b->size);
	b->got += (uint64_t)n;
	sha256_update(&b->hash, *buf, (size_t)n);
	return n;
}

int blob_take_error(struct blob *b, gantry_error_t *err)
{
	if (err && *err == NULL)
		*err = steal_pointer(&b->err);
	return -1;
}

int blob_finish(struct blob *b, gantry_error_t *err)
{
	const void *buf;
	ssize_t n;

	while ((n = blob_read(b, &buf)) > 0)
		;
	if (n < 0)
		return blob_take_error(b, err);
	if (b->size >= 0 && b->got != (uint64_t)b->size)
		return gantry_error(err, 0, "%s: %llu bytes where its descriptor says %lld",
				    b->label, (unsigned long long)b->got, (long long)b->size);
	if (sha256_final(&b->hash, b->computed, err) < 0)
		return gantry_error_prefix(err, "%s", b->label);
	if (b->digest[0] && strcmp(b->computed, b->digest) != 0)
		return gantry_error(err, 0, "%s: content does not match its digest (got %s)",
				    b->label, b->computed);
	return 0;
}

int blob_read_all(struct blob *b, size_t max, char **out, size_t *len, gantry_error_t *err)
{
	cleanup_free char *data = NULL;
	size_t n = 0, cap = 0;
	const void *buf;
	ssize_t r;

	if (b->size > (int64_t)max)
		return gantry_error(err, 0, "%s: %lld bytes, more than the %zu allowed", b->label,
				    (long long)b->size, max);
	while ((r = blob_read(b, &buf)) > 0) {
		if ((size_t)r > max - n)
			return gantry_error(err, 0, "%s: more than the %zu bytes allowed", b->label,
					    max);
		if (n + (size_t)r + 1 > cap) {
			cap = MAX(cap * 2, n + (size_t)r + 1);
			data = xrealloc(data, cap);
		}
		memcpy(data + n, buf, (size_t)r);
		n += (size_t)r;
	}
	if (blob_finish(b, err) < 0)
		return -1;
	if (data == NULL)
		data = xzalloc(1);
	data[n] = '\0';
	*out = steal_pointer(&data);
	*len = n;
	return 0;
}

void blob_fd_init(struct blob_fd *s, int fd)
{
	s->fd = fd;
	s->buf = xmalloc(BLOB_READ_BLOCK);
}

void blob_fd_release(struct blob_fd *s)
{
	free(s->buf);
	s->buf = NULL;
}

ssize_t blob_pull_fd(void *arg, const void **buf, gantry_error_t *err)
{
	struct blob_fd *s = arg;
	ssize_t n;

	do
		n = read(s->fd, s->buf, BLOB_READ_BLOCK);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return gantry_error_errno(err, "read");
	*buf = s->buf;
	return n;
}

ssize_t blob_pull_archive(void *arg, const void **buf, gantry_error_t *err)
{
	struct blob_archive *s = arg;
	la_int64_t off;
	size_t len;
	int r;

	r = sym_archive_read_data_block(s->a, buf, &len, &off);
	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
		const char *msg = sym_archive_error_string(s->a);

		return gantry_error(err, 0, "read: %s", msg ? msg : "libarchive error");
	}
	if (off != s->pos)
		return gantry_error(err, 0, "sparse tar member");
	if (len > SSIZE_MAX)
		return gantry_error(err, 0, "oversized read");
	s->pos += (int64_t)len;
	return (ssize_t)len;
}
