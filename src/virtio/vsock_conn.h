/* What vsock.c (the device and its queues) and vsock_conn.c (connections and
 * their Unix sockets) share; nothing else includes it. The connections call
 * back into the device only to fill the RX queue after a socket or timer
 * event (vsock_rx_fill). */
#ifndef GANTRY_VIRTIO_VSOCK_CONN_H
#define GANTRY_VIRTIO_VSOCK_CONN_H

#include <linux/virtio_vsock.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio/dev.h"
#include "virtio/vsock.h"

#define VSOCK_HDR_SIZE	((uint32_t)sizeof(struct virtio_vsock_hdr))
#define VSOCK_CTRL_MAX	128 /* RSTs to stray packets awaiting RX */
#define VSOCK_HASH_SIZE 256

struct ioloop;

/* An intrusive doubly-linked list. */
struct link {
	struct link *prev, *next;
};

enum conn_state {
	CONN_LINE,	 /* host client: reading its CONNECT line */
	CONN_CONNECTING, /* guest connect: Unix connect in progress */
	CONN_REQUESTED,	 /* host connect: waiting for the guest's RESPONSE */
	CONN_OPEN,
	CONN_CLOSING, /* the guest shut down both ways: flush, then RST */
	CONN_RESET,   /* socket closed; an RST to the guest is pending */
};

/* Packets a connection owes the guest. */
enum {
	CTRL_REQUEST = 1 << 0,
	CTRL_RESPONSE = 1 << 1,
	CTRL_SHUTDOWN = 1 << 2,
	CTRL_CREDIT = 1 << 3,
	CTRL_RST = 1 << 4,
};

struct vsock_conn {
	struct virtio_vsock *vs;
	struct link node; /* vs->conns, or vs->graveyard once dead */
	struct link rxq;  /* vs->rxq while it has something for the guest */
	struct vsock_conn *hnext;
	bool hashed, dead, timed;
	enum conn_state state;
	int fd;
	uint32_t local_port, peer_port; /* host side, guest side */
	unsigned int ctrl;
	uint64_t deadline_ms;
	bool readable, writable; /* until a call says EAGAIN */
	bool unix_eof;		 /* the socket said EOF: guest told SHUTDOWN SEND */
	bool guest_rcv_shut, guest_send_shut, wr_shut;
	/* Guest to host: bytes received, written to the socket, last advertised. */
	uint32_t rx_cnt, fwd_cnt, last_fwd_cnt;
	uint8_t *out; /* VSOCK_BUF_ALLOC bytes while the socket lags behind */
	uint32_t out_off, out_len;
	/* Host to guest: the guest's window and what we sent into it. */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
};

/* An RST owed to a packet that matches no connection. */
struct vsock_ctrl {
	uint64_t src_cid;
	uint32_t src_port, dst_port;
};

struct virtio_vsock {
	struct virtio_dev dev;
	struct virtio_vsock_config config;
	uint64_t cid;
	struct ioloop *loop;
	char *dir;			       /* NULL: connect below instead */
	int (*connect)(void *opaque, uint32_t port); /* vmm_vsock_host's */
	void *connect_opaque;
	char *listen_path;
	int listen_fd, timer_fd, kick_fd;
	bool bound; /* listen_path is our socket, to unlink */
	bool timer_armed;
	struct link conns, rxq, graveyard;
	struct vsock_conn *hash[VSOCK_HASH_SIZE];
	unsigned int nr_conns;
	uint32_t next_port;
	struct vsock_ctrl ctrl[VSOCK_CTRL_MAX];
	unsigned int ctrl_head, ctrl_len;
	bool rx_held; /* rx_elem is popped and not yet used */
	struct virtq_elem rx_elem;
};

/* Header fields in host order. */
struct vsock_pkt {
	uint64_t src_cid, dst_cid;
	uint32_t src_port, dst_port, len;
	uint16_t type, op;
	uint32_t flags, buf_alloc, fwd_cnt;
};

#define conn_of(l, member) ((struct vsock_conn *)((char *)(l)-offsetof(struct vsock_conn, member)))

static inline void link_init(struct link *h)
{
	h->prev = h->next = h;
}

static inline bool link_empty(const struct link *h)
{
	return h->next == h;
}

static inline void link_add_tail(struct link *h, struct link *n)
{
	n->prev = h->prev;
	n->next = h;
	h->prev->next = n;
	h->prev = n;
}

static inline void link_del(struct link *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	link_init(n);
}

/* vsock_conn.c */

/* Wake the loop: it frees dead connections and resumes an RX fill. */
void vsock_kick(struct virtio_vsock *vs);
struct vsock_conn *vsock_conn_find(struct virtio_vsock *vs, uint32_t local, uint32_t peer);
/* A guest's REQUEST for host port p->dst_port: connect to its Unix socket.
 * -1 when refused; the device then owes the guest an RST. */
int vsock_guest_connect(struct virtio_vsock *vs, const struct vsock_pkt *p);
/* A well-formed packet for connection c; e holds its payload. */
void vsock_conn_recv(struct vsock_conn *c, const struct vsock_pkt *p, const struct virtq_elem *e);
/* The socket went away or the guest broke the protocol: close the socket
 * and owe the guest an RST. */
void vsock_conn_reset(struct vsock_conn *c);
/* Forget c; its memory is freed by vsock_reap on the loop thread. */
void vsock_conn_drop(struct vsock_conn *c);
void vsock_drop_all(struct virtio_vsock *vs);
void vsock_reap(struct virtio_vsock *vs);
/* Queue c for the RX filler if it has something for the guest. */
void vsock_conn_kick(struct vsock_conn *c);
/* Whether c may send the guest data now (open, readable, within credit). */
bool vsock_conn_can_send(const struct vsock_conn *c);
/* Read from c's socket straight into e's buffer after its header, within
 * the guest's credit: the payload bytes read, 0 when none. */
uint32_t vsock_conn_rx_data(struct vsock_conn *c, const struct virtq_elem *e);
/* Loop callbacks: the listening socket and the deadline timer. */
void vsock_listen_event(void *opaque, int fd, unsigned int events);
void vsock_timer_event(void *opaque, int fd, unsigned int events);

/* vsock.c: hand the guest what is pending, as far as its RX buffers go. */
void vsock_rx_fill(struct virtio_vsock *vs);

#endif
