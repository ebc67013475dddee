/* The server name a guest's TLS ClientHello asks for (SNI, RFC 6066 3),
 * read from the first bytes of its TCP stream: guest bytes, each bounded
 * before use. The hello may come in several TLS records and several TCP
 * segments: the caller hands the stream's first bytes so far, and hears
 * whether more are needed. */
#ifndef GANTRY_NET_TLS_HELLO_H
#define GANTRY_NET_TLS_HELLO_H

#include <stddef.h>
#include <stdint.h>

#define TLS_HELLO_MAX 16384 /* stream bytes read for a hello; past it: TLS_HELLO_BAD */
#define TLS_NAME_MAX  253

enum tls_hello {
	TLS_HELLO_MORE,	   /* what came so far is a hello's start */
	TLS_HELLO_NOT_TLS, /* the stream does not start with a TLS handshake */
	TLS_HELLO_NAME,	   /* a server name: in name, lowercase */
	TLS_HELLO_NO_NAME, /* a whole hello without one */
	TLS_HELLO_BAD,	   /* a TLS handshake that is no well-formed ClientHello */
};

/* Read the stream's first len bytes; name (TLS_NAME_MAX + 1 bytes) gets
 * the server name. */
enum tls_hello tls_hello_name(const uint8_t *buf, size_t len, char *name);
const char *tls_hello_str(enum tls_hello r);

#endif
