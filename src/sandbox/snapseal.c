/* The seal on a snapshot's configuration (see snapseal.h). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "image/lazylib.h"
#include "sandbox/snapseal.h"

#define KEY_FILE "snapshot.key"
#define KEY_LEN	 32

/* Read the key from an open file: the user's own, 0600, KEY_LEN bytes. */
static int key_read(int fd, const char *path, unsigned char key[KEY_LEN], gantry_error_t *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return gantry_error_errno(err, "%s", path);
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
	    st.st_size != KEY_LEN)
		return gantry_error(err, 0,
				    "%s: want a file of %d bytes, yours, readable by you alone",
				    path, KEY_LEN);
	if (read_full(fd, key, KEY_LEN) < 0)
		return gantry_error_errno(err, "read %s", path);
	return 0;
}

/* The home's key; made (once, whoever gets there first) where create. */
static int key_load(bool create, unsigned char key[KEY_LEN], gantry_error_t *err)
{
	cleanup_free char *home = NULL, *path = NULL;
	cleanup_close int fd = -1;

	if (gantry_home(&home, err) < 0)
		return -1;
	xasprintf(&path, "%s/%s", home, KEY_FILE);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		cleanup_free char *tmp = NULL;
		cleanup_close int out = -1;

		if (getrandom(key, KEY_LEN, 0) != KEY_LEN)
			return gantry_error_errno(err, "getrandom");
		xasprintf(&tmp, "%s.%d", path, (int)getpid());
		out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (out < 0 || write_full(out, key, KEY_LEN) < 0 || fsync(out) < 0) {
			gantry_error_errno(err, "write %s", tmp);
			unlink(tmp);
			return -1;
		}
		/* link, not rename: a key another process made first stays. */
		if (link(tmp, path) < 0 && errno != EEXIST) {
			gantry_error_errno(err, "%s", path);
			unlink(tmp);
			return -1;
		}
		unlink(tmp);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0)
		return gantry_error_errno(err, "%s", path);
	return key_read(fd, path, key, err);
}

static int seal(bool create, const void *config, size_t len, char hex[SNAP_SEAL_HEX + 1],
		gantry_error_t *err)
{
	unsigned char key[KEY_LEN], mac[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int r = -1;

	if (lazy_crypto(err) < 0 || key_load(create, key, err) < 0)
		goto out;
	if (sym_HMAC(sym_EVP_sha256(), key, KEY_LEN, config, len, mac, &n) == NULL ||
	    n * 2 != SNAP_SEAL_HEX) {
		gantry_error(err, 0, "HMAC-SHA256 failed");
		goto out;
	}
	for (unsigned int i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	r = 0;
out:
	explicit_bzero(key, sizeof(key));
	return r;
}

int snap_seal_make(const void *config, size_t len, char hex[SNAP_SEAL_HEX + 1],
		   gantry_error_t *err)
{
	return seal(true, config, len, hex, err);
}

int snap_seal_check(const char *sdir, const char *config, size_t max, gantry_error_t *err)
{
	cleanup_free char *path = NULL, *text = NULL, *given = NULL;
	char want[SNAP_SEAL_HEX + 1];
	unsigned char diff = 0;
	size_t len, glen;

	xasprintf(&path, "%s/%s", sdir, config);
	if (read_file_max(path, max, &text, &len, err) < 0)
		return -1;
	free(path);
	xasprintf(&path, "%s/%s", sdir, SNAP_SEAL);
	if (read_file_max(path, SNAP_SEAL_HEX + 1, &given, &glen, err) < 0)
		return -1;
	if (text == NULL)
		return gantry_error(err, ENOENT, "no %s", config);
	if (given == NULL || glen < SNAP_SEAL_HEX || seal(false, text, len, want, err) < 0) {
		gantry_error_free(err);
		return gantry_error(err, 0,
				    "not made by this Gantry home (its %s has no valid seal): a "
				    "snapshot from elsewhere could run commands on this host "
				    "through its secrets and shares",
				    config);
	}
	for (size_t i = 0; i < SNAP_SEAL_HEX; i++)
		diff |= (unsigned char)(want[i] ^ given[i]);
	if (diff)
		return gantry_error(err, 0,
				    "not made by this Gantry home (its %s does not match its "
				    "seal): a snapshot from elsewhere could run commands on this "
				    "host through its secrets and shares",
				    config);
	return 0;
}
