/* The sandbox's egress CA (gantry.ca=BASE64, the certificate's DER in
 * base64 on one line): with injected secrets, the guest's HTTPS to their
 * hosts ends in Gantry's egress worker, whose leaves this CA signs. The
 * container trusts it three ways, each bound read-only from <state>/etc:
 * /etc/gantry/ca.pem (the CA alone), /etc/gantry/ca-bundle.crt (the
 * image's own bundle and the CA), which also covers the image's
 * /etc/ssl/certs/ca-certificates.crt where it has one; and the variables
 * OpenSSL, curl, Python's requests and Node read (spec.c). The CA's key
 * never leaves the host. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/guest.h"

#define CA_B64_MAX   4096
#define BUNDLE_MAX   (4 * 1024 * 1024)
#define IMAGE_BUNDLE "etc/ssl/certs/ca-certificates.crt"

static const char *const trust_env[][2] = {
	{ "SSL_CERT_FILE", TRUST_BUNDLE },
	{ "REQUESTS_CA_BUNDLE", TRUST_BUNDLE },
	{ "CURL_CA_BUNDLE", TRUST_BUNDLE },
	{ "NODE_EXTRA_CA_CERTS", TRUST_CA },
};

bool trust_b64_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > CA_B64_MAX || n % 4)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '+' || s[i] == '/' ||
		      (s[i] == '=' && i >= n - 2)))
			return false;
	return true;
}

int guest_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The CA as PEM on fd. */
/* b64 as a PEM certificate, lines of 64 (malloc'd; NULL: no memory). */
static char *pem_build(const char *b64, size_t *len)
{
	size_t n = strlen(b64), at = 28;
	char *p = malloc(28 + n + (n + 63) / 64 + 26);

	if (p == NULL)
		return NULL;
	memcpy(p, "-----BEGIN CERTIFICATE-----\n", 28);
	for (size_t i = 0; i < n; i += 64) {
		size_t k = n - i < 64 ? n - i : 64;

		memcpy(p + at, b64 + i, k);
		at += k;
		p[at++] = '\n';
	}
	memcpy(p + at, "-----END CERTIFICATE-----\n", 26);
	*len = at + 26;
	return p;
}

static int put_pem(int fd, const char *b64)
{
	size_t len;
	char *pem = pem_build(b64, &len);
	int r = pem ? guest_write_all(fd, pem, len) : -1;

	free(pem);
	return r;
}

/* The image's bundle, as the container would resolve it, onto fd; whether
 * it has one. */
static bool put_image_bundle(const char *rootfs, int fd)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, /* a FIFO */
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC), in = -1;
	char buf[16384];
	size_t total = 0;
	struct stat st;
	ssize_t n;
	bool ok = false;

	if (root >= 0)
		in = (int)syscall(SYS_openat2, root, IMAGE_BUNDLE, &how, sizeof(how));
	if (in >= 0 && fstat(in, &st) == 0 && S_ISREG(st.st_mode)) {
		ok = true;
		while ((n = read(in, buf, sizeof(buf))) > 0 && total < BUNDLE_MAX) {
			total += (size_t)n;
			if (guest_write_all(fd, buf, (size_t)n) < 0)
				break;
		}
		if (total && buf[(total - 1) % sizeof(buf)] != '\n')
			guest_write_all(fd, "\n", 1);
	}
	if (in >= 0)
		close(in);
	if (root >= 0)
		close(root);
	return ok;
}

static int create(const char *dir, const char *name)
{
	char path[GUEST_PATH_MAX];

	if (guest_pathf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return -1;
	return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

void trust_write(struct guest_config *cfg)
{
	int ca, bundle;
	bool ok;

	if (cfg->ca == NULL || cfg->etc_dir == NULL)
		return;
	ca = create(cfg->etc_dir, "gantry-ca.pem");
	bundle = create(cfg->etc_dir, "gantry-ca-bundle.crt");
	cfg->image_bundle = bundle >= 0 && put_image_bundle(cfg->rootfs, bundle);
	ok = ca >= 0 && bundle >= 0 && put_pem(ca, cfg->ca) == 0 && put_pem(bundle, cfg->ca) == 0;
	if (ca >= 0)
		close(ca);
	if (bundle >= 0)
		close(bundle);
	if (!ok) {
		guest_log("the egress CA: %s; HTTPS with injected secrets will not be trusted",
			  strerror(errno));
		cfg->ca = NULL;
	}
}

/* Whether fd (size bytes) ends with put_pem's of b64, the CA the bundle
 * ends with: only then is cutting it off the bundle safe. *len: its
 * length. */
static bool ends_with_pem(int fd, off_t size, const char *b64, size_t *len)
{
	char *want = pem_build(b64, len), *have = want ? malloc(*len) : NULL;
	bool same = have && size >= (off_t)*len &&
		    pread(fd, have, *len, size - (off_t)*len) == (ssize_t)*len &&
		    memcmp(want, have, *len) == 0;

	free(want);
	free(have);
	return same;
}

int trust_renew(struct guest_config *cfg, const char *b64)
{
	static char *held; /* the CA cfg->ca names since the last renewal */
	char path[GUEST_PATH_MAX];
	struct stat st;
	size_t len = 0;
	char *copy;
	int fd, r;

	if (!trust_b64_valid(b64)) {
		errno = EINVAL;
		return -1;
	}
	/* Booted without one, the container was told of none. */
	if (cfg->ca == NULL || cfg->etc_dir == NULL) {
		errno = ENOENT;
		return -1;
	}
	if (guest_pathf(path, sizeof(path), "%s/gantry-ca-bundle.crt", cfg->etc_dir) < 0)
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	/* The old CA is cut off the end only where it is there whole: a
	 * bundle changed otherwise is left as it is. */
	r = fstat(fd, &st) == 0 && ends_with_pem(fd, st.st_size, cfg->ca, &len) ? 0 : -1;
	if (r < 0)
		errno = EBADMSG;
	if (r == 0)
		r = ftruncate(fd, st.st_size - (off_t)len);
	if (r == 0 && lseek(fd, 0, SEEK_END) < 0)
		r = -1;
	if (r == 0)
		r = put_pem(fd, b64);
	close(fd);
	if (r < 0)
		return -1;
	fd = create(cfg->etc_dir, "gantry-ca.pem");
	r = fd >= 0 ? put_pem(fd, b64) : -1;
	if (fd >= 0)
		close(fd);
	if (r < 0)
		return -1;
	copy = strdup(b64);
	if (copy == NULL)
		return -1;
	free(held);
	held = copy;
	cfg->ca = held;
	return 0;
}

size_t trust_env_count(void)
{
	return sizeof(trust_env) / sizeof(trust_env[0]);
}

const char *trust_env_name(size_t i)
{
	return trust_env[i][0];
}

const char *trust_env_value(size_t i)
{
	return trust_env[i][1];
}
