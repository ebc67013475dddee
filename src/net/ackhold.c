/* Held ACKs (see ackhold.h). */
#include <string.h>

#include "common/util.h"
#include "net/ackhold.h"
#include "net/frame.h"

#define HELD_FRAME_MAX (FRAME_L4 + 60) /* a TCP header with every option */

struct held {
	bool used;
	struct flow_key key;
	uint64_t due_ms;
	size_t len;
	uint8_t frame[HELD_FRAME_MAX];
};

struct ack_hold {
	size_t used;
	struct held slot[ACK_HOLD_MAX];
};

bool ack_hold_small(uint32_t seqlen, uint16_t mss)
{
	return seqlen < ACK_HOLD_SMALL && (mss == 0 || seqlen < mss);
}

struct ack_hold *ack_hold_new(void)
{
	return xzalloc(sizeof(struct ack_hold));
}

void ack_hold_free(struct ack_hold *h)
{
	free(h);
}

void ack_hold_drop(struct ack_hold *h, const struct flow_key *k)
{
	for (size_t i = 0; h->used && i < ACK_HOLD_MAX; i++) {
		if (h->slot[i].used && flow_key_eq(&h->slot[i].key, k)) {
			h->slot[i].used = false;
			h->used--;
			return;
		}
	}
}

/* A segment with only ACK (and perhaps PSH) set, no payload, a window. */
static bool pure_ack(const uint8_t *frame, size_t len)
{
	const uint8_t *ip = frame + FRAME_IP, *tcp = frame + FRAME_L4;
	size_t tot, hlen;

	if (len < FRAME_L4 + TCP_HLEN || len > HELD_FRAME_MAX || ip[0] != 0x45)
		return false;
	tot = frame_get16(ip + 2);
	hlen = (size_t)(tcp[12] >> 4) * 4;
	return tot <= len - FRAME_IP && tot == IPV4_HLEN + hlen &&
	       (tcp[13] & ~TCP_PSH) == TCP_ACK && frame_get16(tcp + 14) != 0;
}

bool ack_hold_offer(struct ack_hold *h, const struct flow_key *k, bool small,
		    const uint8_t *frame, size_t len, uint64_t now_ms)
{
	struct held *free_slot = NULL;

	ack_hold_drop(h, k);
	if (!small || h->used == ACK_HOLD_MAX || !pure_ack(frame, len))
		return false;
	for (size_t i = 0; i < ACK_HOLD_MAX && free_slot == NULL; i++)
		if (!h->slot[i].used)
			free_slot = &h->slot[i];
	free_slot->used = true;
	free_slot->key = *k;
	free_slot->due_ms = now_ms + ACK_HOLD_MS;
	free_slot->len = len;
	memcpy(free_slot->frame, frame, len);
	h->used++;
	return true;
}

int ack_hold_timeout(const struct ack_hold *h, uint64_t now_ms)
{
	uint64_t best = UINT64_MAX;

	for (size_t i = 0; h->used && i < ACK_HOLD_MAX; i++)
		if (h->slot[i].used && h->slot[i].due_ms < best)
			best = h->slot[i].due_ms;
	if (best == UINT64_MAX)
		return -1;
	return best <= now_ms ? 0 : (int)(best - now_ms);
}

void ack_hold_release(struct ack_hold *h, uint64_t now_ms,
		      void (*send)(void *opaque, const uint8_t *frame, size_t len), void *opaque)
{
	for (size_t i = 0; h->used && i < ACK_HOLD_MAX; i++) {
		struct held *s = &h->slot[i];

		if (!s->used || s->due_ms > now_ms)
			continue;
		s->used = false;
		h->used--;
		send(opaque, s->frame, s->len);
	}
}
