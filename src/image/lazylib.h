/* libarchive, libcurl and libcrypto, loaded the first time they are needed.
 *
 * Between them the two link some forty shared libraries (TLS, Kerberos, LDAP,
 * ICU, libxml2, six compressors). Mapping and relocating those was most of
 * the start-up time of every gantry process, including the ones that never
 * touch an archive or a registry: `gantry run`, `exec` of an image already in
 * the cache, the sandbox supervisor. So the binary does not link them; the
 * image code dlopen()s them by soname through lazy_archive() / lazy_curl()
 * at its entry points (reading a layer or a docker-save tar, opening a
 * registry) and calls them through the sym_ pointers declared here.
 * libcrypto (sha256) alone is one library, but the largest to
 * relocate (some 21,000 relocations): every worker process the sandboxes
 * start paid for it at each start without ever hashing a byte
 * (lazy_crypto(), on the first digest).
 *
 * A new libarchive, libcurl or libcrypto function goes into ARCHIVE_SYMS /
 * CURL_SYMS / CRYPTO_SYMS and is called as sym_NAME; calling NAME directly
 * fails to link. */
#ifndef GANTRY_IMAGE_LAZYLIB_H
#define GANTRY_IMAGE_LAZYLIB_H

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/error.h"
#include "common/lazy.h"

#define ARCHIVE_SYMS(X)                                                                        \
	X(archive_entry_clear)                                                                 \
	X(archive_entry_copy_pathname)                                                         \
	X(archive_entry_copy_symlink)                                                          \
	X(archive_entry_filetype)                                                              \
	X(archive_entry_free)                                                                  \
	X(archive_entry_gid)                                                                   \
	X(archive_entry_hardlink)                                                              \
	X(archive_entry_mtime)                                                                 \
	X(archive_entry_mtime_is_set)                                                          \
	X(archive_entry_mtime_nsec)                                                            \
	X(archive_entry_new)                                                                   \
	X(archive_entry_pathname)                                                              \
	X(archive_entry_perm)                                                                  \
	X(archive_entry_rdevmajor)                                                             \
	X(archive_entry_rdevminor)                                                             \
	X(archive_entry_set_filetype)                                                          \
	X(archive_entry_set_gid)                                                               \
	X(archive_entry_set_mtime)                                                             \
	X(archive_entry_set_perm)                                                              \
	X(archive_entry_set_size)                                                              \
	X(archive_entry_set_uid)                                                               \
	X(archive_entry_size)                                                                  \
	X(archive_entry_size_is_set)                                                           \
	X(archive_entry_sparse_count)                                                          \
	X(archive_entry_symlink)                                                               \
	X(archive_entry_uid)                                                                   \
	X(archive_entry_xattr_next)                                                            \
	X(archive_entry_xattr_reset)                                                           \
	X(archive_errno)                                                                       \
	X(archive_error_string)                                                                \
	X(archive_filter_count)                                                                \
	X(archive_read_data_block)                                                             \
	X(archive_read_free)                                                                   \
	X(archive_read_new)                                                                    \
	X(archive_read_next_header)                                                            \
	X(archive_read_open)                                                                   \
	X(archive_read_open_fd)                                                                \
	X(archive_read_open_filename)                                                          \
	X(archive_read_support_filter_gzip)                                                    \
	X(archive_read_support_filter_zstd)                                                    \
	X(archive_read_support_format_empty)                                                   \
	X(archive_read_support_format_raw)                                                     \
	X(archive_read_support_format_tar)                                                     \
	X(archive_set_error)                                                                   \
	X(archive_write_close)                                                                 \
	X(archive_write_data)                                                                  \
	X(archive_write_free)                                                                  \
	X(archive_write_header)                                                                \
	X(archive_write_new)                                                                   \
	X(archive_write_open_fd)                                                               \
	X(archive_write_set_format_pax_restricted)

#define CURL_SYMS(X)                                                                           \
	X(curl_easy_cleanup)                                                                   \
	X(curl_easy_escape)                                                                    \
	X(curl_easy_getinfo)                                                                   \
	X(curl_easy_init)                                                                      \
	X(curl_easy_perform)                                                                   \
	X(curl_easy_pause)                                                                     \
	X(curl_easy_reset)                                                                     \
	X(curl_easy_setopt)                                                                    \
	X(curl_easy_strerror)                                                                  \
	X(curl_free)                                                                           \
	X(curl_global_init)                                                                    \
	X(curl_multi_add_handle)                                                               \
	X(curl_multi_cleanup)                                                                  \
	X(curl_multi_info_read)                                                                \
	X(curl_multi_init)                                                                     \
	X(curl_multi_perform)                                                                  \
	X(curl_multi_poll)                                                                     \
	X(curl_multi_remove_handle)                                                            \
	X(curl_multi_strerror)                                                                 \
	X(curl_slist_append)                                                                   \
	X(curl_slist_free_all)                                                                 \
	X(curl_url)                                                                            \
	X(curl_url_cleanup)                                                                    \
	X(curl_url_get)                                                                        \
	X(curl_url_set)

#define CRYPTO_SYMS(X)                                                                         \
	X(EVP_DigestFinal_ex)                                                                  \
	X(EVP_DigestInit_ex)                                                                   \
	X(EVP_DigestUpdate)                                                                    \
	X(EVP_MD_CTX_free)                                                                     \
	X(EVP_MD_CTX_new)                                                                      \
	X(EVP_sha256)                                                                          \
	X(HMAC)

ARCHIVE_SYMS(LAZY_DECLARE)
CURL_SYMS(LAZY_DECLARE)
CRYPTO_SYMS(LAZY_DECLARE)

/* Load the library and resolve every symbol of its list, once per process
 * (later calls return the first result). -1 with one line naming the
 * library, why it did not load, and the Debian package that has it. */
int lazy_archive(gantry_error_t *err);
/* Also runs curl_global_init. */
int lazy_curl(gantry_error_t *err);
int lazy_crypto(gantry_error_t *err);

#endif
