/* 16550A UART at COM1 (0x3f8, IRQ 4): the guest console. Output goes
 * line by line (or SERIAL_OUT_BUF bytes at a time) through a struct console
 * (console.h, which caps a log file); input, when attached, comes from an
 * fd. Its interrupt leaves on an irqfd: IRQ 4 is an ISA line, edge
 * triggered, so a rising edge of the UART's line is one write, from
 * whichever thread makes it (no KVM request after set-up). */
#ifndef GANTRY_VMM_SERIAL_H
#define GANTRY_VMM_SERIAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define SERIAL_COM1_BASE 0x3f8
#define SERIAL_COM1_IRQ	 4
#define SERIAL_RX_FIFO	 64
#define SERIAL_OUT_BUF	 4096

struct vm;
struct console;
struct state_file;
struct state_writer;

struct serial {
	pthread_mutex_t lock;
	struct vm *vm;		 /* NULL in tests: no interrupt line */
	struct console *console; /* NULL: output dropped */
	char out[SERIAL_OUT_BUF];
	size_t out_len;

	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm;
	bool thr_pending; /* THR-empty interrupt not yet seen through IIR */
	uint8_t rx[SERIAL_RX_FIFO];
	unsigned int rx_head, rx_count;
	int irq_level;
	int irq_fd; /* the irqfd of IRQ 4; -1 in tests */
};

void serial_init(struct serial *s, struct vm *vm, struct console *console);
/* Register the UART's ports on vm's port bus and wire its irqfd. */
int serial_attach(struct serial *s, gantry_error_t *err);
/* Bus access handler (exposed for tests). */
void serial_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);
/* Queue console input; returns how many bytes fit. */
size_t serial_input(struct serial *s, const uint8_t *buf, size_t len);
/* Write out any partial line. */
void serial_flush(struct serial *s);
/* Its registers as a snapshot's "SER0" section, and back; input not yet
 * read is not kept. */
void serial_save(struct serial *s, struct state_writer *w);
int serial_restore(struct serial *s, const struct state_file *sf, gantry_error_t *err);
/* Close the irqfd. */
void serial_destroy(struct serial *s);

#endif
