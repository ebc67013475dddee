/* DNS wire constants and helpers shared by the proxy (dns.c) and its
 * message checks (dns_wire.c); the checks themselves are in dns.h. */
#ifndef GANTRY_NET_DNS_WIRE_H
#define GANTRY_NET_DNS_WIRE_H

#include <stdint.h>

#define DNS_HDR_LEN 12
#define DNS_MSG_MAX 65535 /* a TCP message, or the largest UDP payload */

#define DNS_FLAG_QR	  0x8000
#define DNS_FLAG_TC	  0x0200
#define DNS_FLAG_RD	  0x0100
#define DNS_FLAG_RA	  0x0080
#define DNS_OPCODE(flags) (((flags) >> 11) & 0xf)

#define DNS_RCODE_NOERROR  0
#define DNS_RCODE_FORMERR  1
#define DNS_RCODE_SERVFAIL 2
#define DNS_RCODE_NXDOMAIN 3
#define DNS_RCODE_REFUSED  5

#define DNS_TYPE_A     1
#define DNS_TYPE_CNAME 5
#define DNS_TYPE_OPT   41
#define DNS_TYPE_ANY   255
#define DNS_CLASS_IN   1

uint16_t dns_get16(const uint8_t *p);
void dns_put16(uint8_t *p, uint16_t v);

#endif
