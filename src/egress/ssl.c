/* dlopen() of libssl and libcrypto on first use (see ssl.h). */
#include "egress/ssl.h"
#include "image/lazylib.h"

_Static_assert(OPENSSL_VERSION_MAJOR == 3, "OpenSSL 3 is libssl.so.3 and libcrypto.so.3");

EGRESS_SSL_SYMS(LAZY_DEFINE)
EGRESS_CRYPTO_SYMS(LAZY_DEFINE)

static const struct lazy_sym ssl_syms[] = { EGRESS_SSL_SYMS(LAZY_ENTRY) };
static const struct lazy_sym crypto_syms[] = { EGRESS_CRYPTO_SYMS(LAZY_ENTRY) };

static struct lazy_lib ssl_lib = LAZY_LIB("libssl.so.3", "libssl3", ssl_syms);
/* The same library as image/lazylib.c's: dlopen() hands back its handle. */
static struct lazy_lib crypto_lib = LAZY_LIB("libcrypto.so.3", "libssl3", crypto_syms);

int egress_ssl_load(gantry_error_t *err)
{
	if (lazy_crypto(err) < 0 || lazy_load(&crypto_lib, err) < 0)
		return -1;
	return lazy_load(&ssl_lib, err);
}
