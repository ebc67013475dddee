/* The egress worker's certificates (see tls_priv.h): the sandbox CA, its
 * leaves, and the host names a leaf may carry. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "egress/tls_priv.h"
#include "image/lazylib.h"

#define CERT_BACKDATE_S 3600 /* a guest's clock a little behind the host's */
#define CERT_LIFETIME_S (365L * 24 * 3600)
#define SERIAL_BYTES	16
#define CN_MAX		64 /* X.520's ub-common-name: a longer host gets no CN */
#define LABEL_MAX	63

/* NULL where h is a name this module binds; otherwise what is wrong. */
const char *host_invalid(const char *h)
{
	size_t len = strnlen(h, EGRESS_HOST_MAX + 1), label = 0;
	bool numeric = true; /* the label so far is all digits */
	struct in_addr a;

	if (len == 0)
		return "is empty";
	if (len > EGRESS_HOST_MAX)
		return "is longer than 253 bytes";
	/* inet_aton takes 10.1 and 0x7f.1 too: each an address, not a name. */
	if (strchr(h, ':') || inet_aton(h, &a))
		return "is an IP address: secrets are bound to host names";
	if (h[0] == '*')
		return "is a wildcard: secrets are bound to whole host names";
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? h[i] : '.';

		if (c == '.') {
			if (label == 0)
				return "has an empty label";
			if (label > LABEL_MAX)
				return "has a label longer than 63 bytes";
			if (h[i - 1] == '-' || h[i - label] == '-')
				return "has a label that starts or ends with -";
			if (i == len && numeric)
				return "is an IP address: secrets are bound to host names";
			label = 0;
			numeric = true;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
			label++;
			numeric = numeric && c >= '0' && c <= '9';
		} else if (c >= 'A' && c <= 'Z') {
			return "is not lowercase";
		} else {
			return "has a character other than a-z, 0-9, - and .";
		}
	}
	return NULL;
}

/* "host <h> <why>", h sanitised (it may be anything). */
int host_refuse(gantry_error_t *err, const char *h, const char *why)
{
	cleanup_free char *shown =
		text_sanitized(h, strnlen(h, NAME_SHOWN_MAX + 1), NAME_SHOWN_MAX);

	return gantry_error_usage(err, "host `%s` %s", shown, why);
}

static EVP_PKEY *key_new(gantry_error_t *err)
{
	/* EVP_EC_gen("P-256"), which names EVP_PKEY_Q_keygen unlazily. */
	EVP_PKEY *k = sym_EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");

	if (k == NULL)
		ssl_fail(err, 0, "cannot make an EC P-256 key");
	return k;
}

static int serial_set(X509 *x, gantry_error_t *err)
{
	unsigned char b[SERIAL_BYTES];
	BIGNUM *bn;
	bool ok;

	if (sym_RAND_bytes(b, sizeof(b)) != 1)
		return ssl_fail(err, 0, "cannot draw a serial number");
	/* Positive (DER's INTEGER is signed) and never shorter. */
	b[0] = (unsigned char)((b[0] & 0x7f) | 0x40);
	bn = sym_BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && sym_BN_to_ASN1_INTEGER(bn, sym_X509_get_serialNumber(x)) != NULL;
	sym_BN_free(bn);
	return ok ? 0 : ssl_fail(err, 0, "cannot set a serial number");
}

struct cert_ext {
	int nid;
	const char *value; /* as openssl.cnf writes it */
};

/* A certificate of key: CN cn (NULL: an empty subject), valid from an hour
 * ago for a year, with the extensions exts, signed by issuer's
 * issuer_key (issuer NULL: by key, self-signed). */
static X509 *cert_new(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
		      const struct cert_ext *exts, size_t nr_exts, gantry_error_t *err)
{
	X509 *x = sym_X509_new();
	X509_NAME *subject;
	X509V3_CTX ctx;

	if (x == NULL) {
		ssl_fail(err, 0, "cannot make a certificate");
		return NULL;
	}
	subject = sym_X509_get_subject_name(x);
	if (sym_X509_set_version(x, X509_VERSION_3) != 1 || serial_set(x, err) < 0 ||
	    !sym_X509_gmtime_adj(sym_X509_getm_notBefore(x), -CERT_BACKDATE_S) ||
	    !sym_X509_gmtime_adj(sym_X509_getm_notAfter(x), CERT_LIFETIME_S) ||
	    (cn && sym_X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
						  (const unsigned char *)cn, -1, -1, 0) != 1) ||
	    sym_X509_set_issuer_name(x, issuer ? sym_X509_get_subject_name(issuer) : subject) !=
		    1 ||
	    sym_X509_set_pubkey(x, key) != 1)
		goto fail;
	memset(&ctx, 0, sizeof(ctx));
	sym_X509V3_set_ctx(&ctx, issuer ? issuer : x, x, NULL, NULL, 0);
	for (size_t i = 0; i < nr_exts; i++) {
		X509_EXTENSION *e = sym_X509V3_EXT_conf_nid(NULL, &ctx, exts[i].nid, exts[i].value);
		int ok = e && sym_X509_add_ext(x, e, -1) == 1;

		sym_X509_EXTENSION_free(e);
		if (!ok) {
			ssl_fail(err, 0, "cannot add extension %s", exts[i].value);
			goto fail_quiet;
		}
	}
	if (sym_X509_sign(x, issuer_key ? issuer_key : key, sym_EVP_sha256()) <= 0)
		goto fail;
	return x;
fail:
	ssl_fail(err, 0, "cannot make a certificate");
fail_quiet:
	sym_X509_free(x);
	return NULL;
}

int ca_new(struct egress_tls *t, gantry_error_t *err)
{
	static const struct cert_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:TRUE" },
		{ NID_key_usage, "critical,keyCertSign,cRLSign" },
		{ NID_subject_key_identifier, "hash" },
	};
	unsigned char id[4];
	char cn[64];
	BIO *b;
	char *pem;
	long len;

	t->ca_key = key_new(err);
	if (t->ca_key == NULL)
		return -1;
	/* Tells one sandbox's CA from another's in a guest's trust store. */
	if (sym_RAND_bytes(id, sizeof(id)) != 1)
		return ssl_fail(err, 0, "cannot draw the CA's id");
	snprintf(cn, sizeof(cn), "Gantry sandbox CA %02x%02x%02x%02x", id[0], id[1], id[2], id[3]);
	t->ca = cert_new(t->ca_key, cn, NULL, NULL, exts, ARRAY_SIZE(exts), err);
	if (t->ca == NULL)
		return gantry_error_prefix(err, "sandbox CA");

	b = sym_BIO_new(sym_BIO_s_mem());
	if (b == NULL || sym_PEM_write_bio_X509(b, t->ca) != 1) {
		sym_BIO_free(b);
		return ssl_fail(err, 0, "cannot write the sandbox CA as PEM");
	}
	/* BIO_get_mem_data */
	len = sym_BIO_ctrl(b, BIO_CTRL_INFO, 0, (char *)&pem);
	t->ca_pem = len > 0 ? xstrndup(pem, (size_t)len) : NULL;
	sym_BIO_free(b);
	return t->ca_pem ? 0 : gantry_error(err, 0, "cannot write the sandbox CA as PEM");
}

void host_free(struct egress_host *h)
{
	if (h == NULL)
		return;
	sym_X509_free(h->leaf);
	sym_EVP_PKEY_free(h->key);
	free(h);
}

/* A leaf of name's, a valid name, signed by t's CA. */
struct egress_host *host_new(struct egress_tls *t, const char *name, gantry_error_t *err)
{
	struct egress_host *h = xzalloc(sizeof(*h));
	bool has_cn = strlen(name) <= CN_MAX;
	char san[EGRESS_HOST_MAX + 32];
	/* An empty subject makes the SAN the name, then critical (RFC 5280
	 * 4.2.1.6). name is [a-z0-9.-]: nothing openssl.cnf's syntax reads. */
	struct cert_ext exts[] = {
		{ NID_basic_constraints, "critical,CA:FALSE" },
		{ NID_key_usage, "critical,digitalSignature" },
		{ NID_ext_key_usage, "serverAuth" },
		{ NID_subject_key_identifier, "hash" },
		{ NID_authority_key_identifier, "keyid:always" },
		{ NID_subject_alt_name, san },
	};

	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(san, sizeof(san), "%sDNS:%s", has_cn ? "" : "critical,", name);
	h->key = key_new(err);
	if (h->key)
		h->leaf = cert_new(h->key, has_cn ? name : NULL, t->ca, t->ca_key, exts,
				   ARRAY_SIZE(exts), err);
	if (h->leaf == NULL) {
		host_free(h);
		gantry_error_prefix(err, "certificate of %s", name);
		return NULL;
	}
	return h;
}
