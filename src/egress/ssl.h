/* libssl and the libcrypto functions the egress worker's TLS needs
 * (egress/tls.h), loaded the first time they are needed, like the image
 * code's libraries (common/lazy.h, image/lazylib.h): the other gantry
 * processes never map libssl. A function of either goes into
 * EGRESS_SSL_SYMS or EGRESS_CRYPTO_SYMS and is called as sym_NAME; those
 * already in image/lazylib.h's CRYPTO_SYMS (EVP_sha256) are called from
 * there and must not be listed twice. OpenSSL's macros expand to calls of
 * SSL_ctrl, SSL_CTX_ctrl, SSL_CTX_callback_ctrl and BIO_ctrl by their
 * plain names, which do not link: write what they expand to with sym_. */
#ifndef GANTRY_EGRESS_SSL_H
#define GANTRY_EGRESS_SSL_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/error.h"
#include "common/lazy.h"

#define EGRESS_SSL_SYMS(X)                                                                         \
	X(SSL_CTX_callback_ctrl)                                                                   \
	X(SSL_CTX_ctrl)                                                                            \
	X(SSL_CTX_free)                                                                            \
	X(SSL_CTX_get_cert_store)                                                                  \
	X(SSL_CTX_new)                                                                             \
	X(SSL_CTX_sess_set_new_cb)                                                                 \
	X(SSL_CTX_set_alpn_protos)                                                                 \
	X(SSL_CTX_set_alpn_select_cb)                                                              \
	X(SSL_CTX_set_num_tickets)                                                                 \
	X(SSL_CTX_set_options)                                                                     \
	X(SSL_CTX_set_verify)                                                                      \
	X(SSL_SESSION_free)                                                                        \
	X(SSL_SESSION_get_time)                                                                    \
	X(SSL_SESSION_get_timeout)                                                                 \
	X(SSL_SESSION_is_resumable)                                                                \
	X(SSL_SESSION_up_ref)                                                                      \
	X(SSL_ctrl)                                                                                \
	X(SSL_do_handshake)                                                                        \
	X(SSL_free)                                                                                \
	X(SSL_get0_alpn_selected)                                                                  \
	X(SSL_get0_peer_certificate)                                                               \
	X(SSL_get_error)                                                                           \
	X(SSL_get_ex_data)                                                                         \
	X(SSL_get_servername)                                                                      \
	X(SSL_get_verify_result)                                                                   \
	X(SSL_new)                                                                                 \
	X(SSL_pending)                                                                             \
	X(SSL_read_ex)                                                                             \
	X(SSL_session_reused)                                                                      \
	X(SSL_set1_host)                                                                           \
	X(SSL_set_accept_state)                                                                    \
	X(SSL_set_connect_state)                                                                   \
	X(SSL_set_ex_data)                                                                         \
	X(SSL_set_fd)                                                                              \
	X(SSL_set_hostflags)                                                                       \
	X(SSL_set_session)                                                                         \
	X(SSL_shutdown)                                                                            \
	X(SSL_use_PrivateKey)                                                                      \
	X(SSL_use_certificate)                                                                     \
	X(SSL_write_ex)                                                                            \
	X(TLS_client_method)                                                                       \
	X(TLS_server_method)

#define EGRESS_CRYPTO_SYMS(X)                                                                      \
	X(BIO_ctrl)                                                                                \
	X(BIO_free)                                                                                \
	X(BIO_new)                                                                                 \
	X(BIO_new_mem_buf)                                                                         \
	X(BIO_s_mem)                                                                               \
	X(BN_bin2bn)                                                                               \
	X(BN_free)                                                                                 \
	X(BN_to_ASN1_INTEGER)                                                                      \
	X(ERR_clear_error)                                                                         \
	X(ERR_error_string_n)                                                                      \
	X(ERR_get_error)                                                                           \
	X(ERR_reason_error_string)                                                                 \
	X(EVP_PKEY_Q_keygen)                                                                       \
	X(EVP_PKEY_free)                                                                           \
	X(PEM_read_bio_X509)                                                                       \
	X(PEM_write_bio_X509)                                                                      \
	X(RAND_bytes)                                                                              \
	X(X509V3_EXT_conf_nid)                                                                     \
	X(X509V3_set_ctx)                                                                          \
	X(X509_EXTENSION_free)                                                                     \
	X(X509_NAME_add_entry_by_txt)                                                              \
	X(X509_STORE_add_cert)                                                                     \
	X(X509_add_ext)                                                                            \
	X(X509_check_host)                                                                         \
	X(X509_free)                                                                               \
	X(X509_get_serialNumber)                                                                   \
	X(X509_get_subject_name)                                                                   \
	X(X509_getm_notAfter)                                                                      \
	X(X509_getm_notBefore)                                                                     \
	X(X509_gmtime_adj)                                                                         \
	X(X509_new)                                                                                \
	X(X509_set_issuer_name)                                                                    \
	X(X509_set_pubkey)                                                                         \
	X(X509_set_version)                                                                        \
	X(X509_sign)                                                                               \
	X(X509_verify_cert_error_string)

EGRESS_SSL_SYMS(LAZY_DECLARE)
EGRESS_CRYPTO_SYMS(LAZY_DECLARE)

/* Load libcrypto (image/lazylib.h's list and ours) and libssl, once per
 * process (later calls return the first result). -1 with one line naming
 * the library, why it did not load, and the Debian package that has it. */
int egress_ssl_load(gantry_error_t *err);

#endif
