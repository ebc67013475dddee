/* 16550A UART emulation (see serial.h): enough of the chip for Linux's 8250
 * driver to detect a 16550A, pass its loopback test, and run interrupt
 * driven in both directions. */
#include <string.h>
#include <unistd.h>

#include "common/util.h"
#include "snapshot/state.h"
#include "vmm/console.h"
#include "vmm/serial.h"
#include "vmm/vm.h"

/* Register offsets and bits (National Semiconductor PC16550D data sheet). */
#define UART_RBR 0 /* THR on write; DLL with DLAB */
#define UART_IER 1 /* DLM with DLAB */
#define UART_IIR 2 /* FCR on write */
#define UART_LCR 3
#define UART_MCR 4
#define UART_LSR 5
#define UART_MSR 6
#define UART_SCR 7

#define UART_IER_RDI	  0x01
#define UART_IER_THRI	  0x02
#define UART_IIR_NONE	  0x01
#define UART_IIR_THRI	  0x02
#define UART_IIR_RDI	  0x04
#define UART_IIR_FIFO	  0xc0
#define UART_FCR_ENABLE	  0x01
#define UART_FCR_CLEAR_RX 0x02
#define UART_LCR_DLAB	  0x80
#define UART_MCR_DTR	  0x01
#define UART_MCR_RTS	  0x02
#define UART_MCR_OUT1	  0x04
#define UART_MCR_OUT2	  0x08
#define UART_MCR_LOOP	  0x10
#define UART_LSR_DR	  0x01
#define UART_LSR_THRE	  0x20
#define UART_LSR_TEMT	  0x40
#define UART_MSR_CTS	  0x10
#define UART_MSR_DSR	  0x20
#define UART_MSR_RI	  0x40
#define UART_MSR_DCD	  0x80

void serial_init(struct serial *s, struct vm *vm, struct console *console)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	s->vm = vm;
	s->console = console;
	s->mcr = UART_MCR_OUT2;
	s->irq_fd = -1;
}

static void serial_flush_locked(struct serial *s)
{
	if (s->out_len && s->console)
		console_write(s->console, s->out, s->out_len);
	s->out_len = 0;
}

static void serial_putc(struct serial *s, uint8_t c)
{
	s->out[s->out_len++] = (char)c;
	if (c == '\n' || s->out_len == sizeof(s->out))
		serial_flush_locked(s);
}

static uint8_t serial_iir(const struct serial *s)
{
	uint8_t fifo = (s->fcr & UART_FCR_ENABLE) ? UART_IIR_FIFO : 0;

	if ((s->ier & UART_IER_RDI) && s->rx_count)
		return fifo | UART_IIR_RDI;
	if ((s->ier & UART_IER_THRI) && s->thr_pending)
		return fifo | UART_IIR_THRI;
	return fifo | UART_IIR_NONE;
}

static void serial_update_irq(struct serial *s)
{
	int level = (serial_iir(s) & UART_IIR_NONE) ? 0 : 1;

	if (!(s->mcr & UART_MCR_OUT2)) /* OUT2 gates the IRQ line on PCs */
		level = 0;
	if (level == s->irq_level)
		return;
	s->irq_level = level;
	/* An edge-triggered pin sees only the rise. A full counter (it
	 * cannot be, the kernel drains it at once) would only lose an edge. */
	if (level && s->irq_fd >= 0) {
		uint64_t one = 1;

		(void)!write(s->irq_fd, &one, sizeof(one));
	}
}

static uint8_t serial_msr(const struct serial *s)
{
	uint8_t msr = 0;

	if (!(s->mcr & UART_MCR_LOOP))
		return UART_MSR_DCD | UART_MSR_DSR | UART_MSR_CTS;
	/* Loopback: modem outputs feed the modem inputs (8250 probe checks it). */
	if (s->mcr & UART_MCR_DTR)
		msr |= UART_MSR_DSR;
	if (s->mcr & UART_MCR_RTS)
		msr |= UART_MSR_CTS;
	if (s->mcr & UART_MCR_OUT1)
		msr |= UART_MSR_RI;
	if (s->mcr & UART_MCR_OUT2)
		msr |= UART_MSR_DCD;
	return msr;
}

static uint8_t serial_read(struct serial *s, unsigned int reg)
{
	bool dlab = s->lcr & UART_LCR_DLAB;
	uint8_t v = 0;

	switch (reg) {
	case UART_RBR:
		if (dlab)
			return s->dll;
		if (s->rx_count) {
			v = s->rx[s->rx_head];
			s->rx_head = (s->rx_head + 1) % SERIAL_RX_FIFO;
			s->rx_count--;
		}
		return v;
	case UART_IER:
		return dlab ? s->dlm : s->ier;
	case UART_IIR:
		v = serial_iir(s);
		if ((v & 0x0f) == UART_IIR_THRI)
			s->thr_pending = false; /* reading IIR acknowledges THRE */
		return v;
	case UART_LCR:
		return s->lcr;
	case UART_MCR:
		return s->mcr;
	case UART_LSR:
		return UART_LSR_THRE | UART_LSR_TEMT | (s->rx_count ? UART_LSR_DR : 0);
	case UART_MSR:
		return serial_msr(s);
	default:
		return s->scr;
	}
}

static void serial_write(struct serial *s, unsigned int reg, uint8_t v)
{
	bool dlab = s->lcr & UART_LCR_DLAB;

	switch (reg) {
	case UART_RBR:
		if (dlab) {
			s->dll = v;
			break;
		}
		if (!(s->mcr & UART_MCR_LOOP))
			serial_putc(s, v);
		else if (s->rx_count < SERIAL_RX_FIFO)
			s->rx[(s->rx_head + s->rx_count++) % SERIAL_RX_FIFO] = v;
		s->thr_pending = true; /* the byte left at once: THR is empty again */
		break;
	case UART_IER:
		if (dlab) {
			s->dlm = v;
			break;
		}
		if ((v & UART_IER_THRI) && !(s->ier & UART_IER_THRI))
			s->thr_pending = true;
		s->ier = v & 0x0f;
		break;
	case UART_IIR:
		s->fcr = v;
		if (v & UART_FCR_CLEAR_RX)
			s->rx_count = 0;
		break;
	case UART_LCR:
		s->lcr = v;
		break;
	case UART_MCR:
		s->mcr = v & 0x1f;
		break;
	case UART_SCR:
		s->scr = v;
		break;
	default:
		break; /* LSR and MSR are read-only */
	}
}

void serial_access(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct serial *s = opaque;

	if (len != 1 || off > UART_SCR) {
		if (!is_write)
			memset(data, 0xff, len);
		return;
	}
	pthread_mutex_lock(&s->lock);
	if (is_write)
		serial_write(s, (unsigned int)off, data[0]);
	else
		data[0] = serial_read(s, (unsigned int)off);
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
}

size_t serial_input(struct serial *s, const uint8_t *buf, size_t len)
{
	size_t n = 0;

	pthread_mutex_lock(&s->lock);
	while (n < len && s->rx_count < SERIAL_RX_FIFO) {
		s->rx[(s->rx_head + s->rx_count) % SERIAL_RX_FIFO] = buf[n++];
		s->rx_count++;
	}
	serial_update_irq(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

void serial_flush(struct serial *s)
{
	pthread_mutex_lock(&s->lock);
	serial_flush_locked(s);
	pthread_mutex_unlock(&s->lock);
}

int serial_attach(struct serial *s, gantry_error_t *err)
{
	s->irq_fd = vm_irqfd(s->vm, SERIAL_COM1_IRQ, err);
	if (s->irq_fd < 0)
		return -1;
	return bus_register(&s->vm->pio, SERIAL_COM1_BASE, 8, serial_access, s, "serial", err);
}

#define SERIAL_TAG STATE_TAG('S', 'E', 'R', '0')

struct serial_saved {
	uint8_t ier, lcr, mcr, scr, fcr, dll, dlm, thr_pending;
};

void serial_save(struct serial *s, struct state_writer *w)
{
	struct serial_saved r;

	pthread_mutex_lock(&s->lock);
	r = (struct serial_saved){ s->ier, s->lcr, s->mcr, s->scr,
				   s->fcr, s->dll, s->dlm, s->thr_pending };
	pthread_mutex_unlock(&s->lock);
	state_put(w, SERIAL_TAG, &r, sizeof(r));
}

int serial_restore(struct serial *s, const struct state_file *sf, gantry_error_t *err)
{
	struct serial_saved r;

	if (state_get(sf, SERIAL_TAG, 0, &r, sizeof(r), err) < 0)
		return -1;
	pthread_mutex_lock(&s->lock);
	s->ier = r.ier;
	s->lcr = r.lcr;
	s->mcr = r.mcr;
	s->scr = r.scr;
	s->fcr = r.fcr;
	s->dll = r.dll;
	s->dlm = r.dlm;
	s->thr_pending = r.thr_pending != 0;
	/* The line as it stood: the restored IOAPIC holds any edge it saw. */
	s->irq_level = (serial_iir(s) & UART_IIR_NONE) || !(s->mcr & UART_MCR_OUT2) ? 0 : 1;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void serial_destroy(struct serial *s)
{
	if (s->irq_fd >= 0)
		close(s->irq_fd);
	s->irq_fd = -1;
}
