/* Held ACKs: a pure ACK libslirp sends the guest for a connection whose
 * guest side writes in small pieces waits a few milliseconds for the next
 * frame of that connection, which replaces it, as a receiver's delayed ACK
 * would. libslirp acknowledges every segment at once, so a guest that
 * writes a kilobyte at a time (busybox nc) sends a kilobyte a segment, each
 * costing it a notification of the device and two interrupts; held, the
 * ACK lets Nagle's algorithm in the guest gather the next writes into one
 * segment. A segment of the guest's that is not small (ACK_HOLD_SMALL or
 * more, or a full one of the MSS its SYN offered: at MTU 1500 a bulk
 * sender's every segment) gets its ACK at once (the sender is then
 * window-bound, and waits for it). Bounded: at most
 * ACK_HOLD_MAX held at once, in a fixed table; no allocation. */
#ifndef GANTRY_NET_ACKHOLD_H
#define GANTRY_NET_ACKHOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/flow.h"

#define ACK_HOLD_MS	2
#define ACK_HOLD_MAX	64
#define ACK_HOLD_SMALL	(16 * 1024) /* a guest segment shorter than this is small */

struct ack_hold;

/* Whether a guest segment of seqlen bytes of data is small, on a
 * connection whose guest offered mss (0: none seen). */
bool ack_hold_small(uint32_t seqlen, uint16_t mss);

struct ack_hold *ack_hold_new(void);
void ack_hold_free(struct ack_hold *h);

/* A frame libslirp sends the guest on TCP flow k (frame as libslirp made
 * it: a 20-byte IPv4 header). What k holds is dropped: the new frame
 * carries a later acknowledgement. Returns true when the frame itself is
 * held (a pure ACK with an open window, small the guest's last segment
 * on k, a slot free); the caller sends it otherwise. */
bool ack_hold_offer(struct ack_hold *h, const struct flow_key *k, bool small,
		    const uint8_t *frame, size_t len, uint64_t now_ms);
/* Forget what k holds (the flow was cut). */
void ack_hold_drop(struct ack_hold *h, const struct flow_key *k);
/* Milliseconds until the next held ACK is due; -1 when none is held. */
int ack_hold_timeout(const struct ack_hold *h, uint64_t now_ms);
/* Each held ACK due by now_ms to send(opaque, frame, len), then gone. */
void ack_hold_release(struct ack_hold *h, uint64_t now_ms,
		      void (*send)(void *opaque, const uint8_t *frame, size_t len), void *opaque);

#endif
