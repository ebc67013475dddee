/* dlopen() of libarchive, libcurl and libcrypto on first use (see lazylib.h). */
#include "image/lazylib.h"

/* The sonames the headers we build against describe; the static asserts
 * catch a major version whose soname differs. */
_Static_assert(ARCHIVE_VERSION_NUMBER >= 3000000 && ARCHIVE_VERSION_NUMBER < 4000000,
	       "libarchive 3 is libarchive.so.13");
_Static_assert(LIBCURL_VERSION_MAJOR == 7 || LIBCURL_VERSION_MAJOR == 8,
	       "libcurl 7 and 8 are libcurl.so.4");
_Static_assert(OPENSSL_VERSION_MAJOR == 3, "OpenSSL 3 is libcrypto.so.3");

ARCHIVE_SYMS(LAZY_DEFINE)
CURL_SYMS(LAZY_DEFINE)
CRYPTO_SYMS(LAZY_DEFINE)

static const struct lazy_sym archive_syms[] = { ARCHIVE_SYMS(LAZY_ENTRY) };
static const struct lazy_sym curl_syms[] = { CURL_SYMS(LAZY_ENTRY) };
static const struct lazy_sym crypto_syms[] = { CRYPTO_SYMS(LAZY_ENTRY) };

static void curl_after(void)
{
	sym_curl_global_init(CURL_GLOBAL_DEFAULT);
}

static struct lazy_lib archive_lib = LAZY_LIB("libarchive.so.13", "libarchive13", archive_syms);

static struct lazy_lib curl_lib = LAZY_LIB("libcurl.so.4", "libcurl4", curl_syms, .after = curl_after);

static struct lazy_lib crypto_lib = LAZY_LIB("libcrypto.so.3", "libssl3", crypto_syms);

int lazy_archive(gantry_error_t *err)
{
	return lazy_load(&archive_lib, err);
}

int lazy_curl(gantry_error_t *err)
{
	return lazy_load(&curl_lib, err);
}

int lazy_crypto(gantry_error_t *err)
{
	return lazy_load(&crypto_lib, err);
}
