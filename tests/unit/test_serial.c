/* Unit tests for vmm/serial.c: the 16550A as Linux's 8250 driver probes and
 * drives it, register by register (PC16550D data sheet), with no VM behind
 * it and the console output going into a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "vmm/console.h"
#include "vmm/serial.h"

#define RBR 0
#define IER 1
#define IIR 2
#define FCR 2
#define LCR 3
#define MCR 4
#define LSR 5
#define MSR 6
#define SCR 7

#define LSR_DR	 0x01
#define LSR_THRE 0x20
#define LSR_TEMT 0x40
#define IER_RDI	 0x01
#define IER_THRI 0x02
#define LCR_DLAB 0x80
#define MCR_LOOP 0x10

struct uart {
	struct serial s;
	struct console console;
	int pipe[2];
};

static int uart_setup(void **state)
{
	struct uart *u = xzalloc(sizeof(*u));

	assert_int_equal(pipe2(u->pipe, O_NONBLOCK | O_CLOEXEC), 0);
	console_init_fd(&u->console, u->pipe[1]);
	serial_init(&u->s, NULL, &u->console);
	*state = u;
	return 0;
}

static int uart_teardown(void **state)
{
	struct uart *u = *state;

	close(u->pipe[0]);
	close(u->pipe[1]);
	free(u);
	return 0;
}

static uint8_t in(struct uart *u, unsigned int reg)
{
	uint8_t v = 0x5a;

	serial_access(&u->s, reg, &v, 1, false);
	return v;
}

static void out(struct uart *u, unsigned int reg, uint8_t v)
{
	serial_access(&u->s, reg, &v, 1, true);
}

static void out_str(struct uart *u, const char *str)
{
	while (*str)
		out(u, RBR, (uint8_t)*str++);
}

/* Whatever the pipe holds now, as a string ("" when empty). */
static const char *drain(struct uart *u)
{
	static char buf[SERIAL_OUT_BUF + 1];
	ssize_t n = read(u->pipe[0], buf, sizeof(buf) - 1);

	if (n < 0) {
		assert_int_equal(errno, EAGAIN);
		n = 0;
	}
	buf[n] = '\0';
	return buf;
}

static void test_lsr(void **state)
{
	struct uart *u = *state;

	assert_int_equal(in(u, LSR), LSR_THRE | LSR_TEMT);
	out(u, RBR, 'x');
	assert_int_equal(in(u, LSR), LSR_THRE | LSR_TEMT);
	/* LSR is read-only. */
	out(u, LSR, 0);
	assert_int_equal(in(u, LSR), LSR_THRE | LSR_TEMT);
}

static void test_scratch(void **state)
{
	struct uart *u = *state;

	assert_int_equal(in(u, SCR), 0);
	out(u, SCR, 0xa5);
	assert_int_equal(in(u, SCR), 0xa5);
	out(u, SCR, 0x5a);
	assert_int_equal(in(u, SCR), 0x5a);
}

static void test_loopback(void **state)
{
	struct uart *u = *state;

	/* Out of loopback the modem lines say "carrier, ready, clear to send". */
	assert_int_equal(in(u, MSR) & 0xf0, 0xb0);
	/* The 8250 probe: LOOP|OUT2|RTS must read back as DCD|CTS. */
	out(u, MCR, 0x1a);
	assert_int_equal(in(u, MSR) & 0xf0, 0x90);
	out(u, MCR, 0x1f);
	assert_int_equal(in(u, MSR) & 0xf0, 0xf0);
	out(u, MCR, MCR_LOOP);
	assert_int_equal(in(u, MSR) & 0xf0, 0);
	/* Transmitted bytes come back as received ones and never leave. */
	out(u, RBR, 'L');
	assert_int_equal(in(u, LSR) & LSR_DR, LSR_DR);
	assert_int_equal(in(u, RBR), 'L');
	assert_int_equal(in(u, LSR) & LSR_DR, 0);
	out(u, MCR, 0x0b);
	assert_int_equal(in(u, MCR), 0x0b);
	serial_flush(&u->s);
	assert_string_equal(drain(u), "");
}

static void test_iir(void **state)
{
	struct uart *u = *state;

	assert_int_equal(in(u, IIR), 0x01);
	out(u, FCR, 0x01);
	assert_int_equal(in(u, IIR), 0xc1);
	out(u, FCR, 0x00);
	assert_int_equal(in(u, IIR), 0x01);
}

static void test_thri(void **state)
{
	struct uart *u = *state;

	out(u, FCR, 0x07);
	out(u, IER, IER_THRI);
	assert_int_equal(in(u, IER), IER_THRI);
	assert_int_equal(u->s.irq_level, 1);
	/* Reading IIR reports THRE and acknowledges it. */
	assert_int_equal(in(u, IIR), 0xc2);
	assert_int_equal(in(u, IIR), 0xc1);
	assert_int_equal(u->s.irq_level, 0);
	/* Each transmitted byte empties THR again. */
	out(u, RBR, 'a');
	assert_int_equal(u->s.irq_level, 1);
	assert_int_equal(in(u, IIR), 0xc2);
	assert_int_equal(in(u, IIR), 0xc1);
	/* Without OUT2 the line stays low (PC wiring). */
	out(u, MCR, 0);
	out(u, RBR, 'b');
	assert_int_equal(u->s.irq_level, 0);
	assert_int_equal(in(u, IIR), 0xc2);
	/* With THRI off there is nothing to report. */
	out(u, IER, 0);
	out(u, RBR, 'c');
	assert_int_equal(in(u, IIR), 0xc1);
}

static void test_rx(void **state)
{
	struct uart *u = *state;
	uint8_t big[SERIAL_RX_FIFO + 10];

	assert_int_equal(in(u, LSR) & LSR_DR, 0);
	assert_int_equal(in(u, RBR), 0);
	assert_int_equal(serial_input(&u->s, (const uint8_t *)"hi", 2), 2);
	assert_int_equal(in(u, LSR), LSR_THRE | LSR_TEMT | LSR_DR);
	/* Received data outranks THRE in IIR. */
	out(u, IER, IER_RDI | IER_THRI);
	assert_int_equal(u->s.irq_level, 1);
	assert_int_equal(in(u, IIR), 0x04);
	assert_int_equal(in(u, RBR), 'h');
	assert_int_equal(in(u, RBR), 'i');
	assert_int_equal(in(u, LSR) & LSR_DR, 0);
	assert_int_equal(in(u, IIR), 0x02);
	assert_int_equal(in(u, IIR), 0x01);
	assert_int_equal(u->s.irq_level, 0);

	/* The FIFO takes what fits and keeps order across its wrap. */
	for (unsigned int i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)i;
	assert_int_equal(serial_input(&u->s, big, sizeof(big)), SERIAL_RX_FIFO);
	assert_int_equal(serial_input(&u->s, big, 1), 0);
	for (unsigned int i = 0; i < SERIAL_RX_FIFO / 2; i++)
		assert_int_equal(in(u, RBR), i);
	assert_int_equal(serial_input(&u->s, big + SERIAL_RX_FIFO, 10), 10);
	for (unsigned int i = SERIAL_RX_FIFO / 2; i < SERIAL_RX_FIFO + 10; i++)
		assert_int_equal(in(u, RBR), i);
	assert_int_equal(in(u, LSR) & LSR_DR, 0);

	/* FCR can clear the receive FIFO. */
	serial_input(&u->s, big, 5);
	out(u, FCR, 0x03);
	assert_int_equal(in(u, LSR) & LSR_DR, 0);
}

static void test_output_lines(void **state)
{
	struct uart *u = *state;

	out_str(u, "hello");
	assert_string_equal(drain(u), "");
	out_str(u, " world\nnext");
	assert_string_equal(drain(u), "hello world\n");
	serial_flush(&u->s);
	assert_string_equal(drain(u), "next");
	serial_flush(&u->s);
	assert_string_equal(drain(u), "");
	out_str(u, "a\nb\n");
	assert_string_equal(drain(u), "a\nb\n");
}

static void test_output_long_line(void **state)
{
	struct uart *u = *state;
	const char *got;

	/* A line longer than the buffer goes out in buffer-sized pieces. */
	for (unsigned int i = 0; i < SERIAL_OUT_BUF + 3; i++)
		out(u, RBR, (uint8_t)('a' + i % 26));
	got = drain(u);
	assert_int_equal(strlen(got), SERIAL_OUT_BUF);
	assert_int_equal(got[SERIAL_OUT_BUF - 1], 'a' + (SERIAL_OUT_BUF - 1) % 26);
	serial_flush(&u->s);
	assert_int_equal(strlen(drain(u)), 3);
}

static void test_dlab(void **state)
{
	struct uart *u = *state;

	out(u, IER, IER_RDI);
	out(u, LCR, LCR_DLAB | 0x03);
	assert_int_equal(in(u, LCR), LCR_DLAB | 0x03);
	/* 115200 baud: divisor 1. */
	out(u, RBR, 0x01);
	out(u, IER, 0x00);
	assert_int_equal(in(u, RBR), 0x01);
	assert_int_equal(in(u, IER), 0x00);
	out(u, RBR, 0x0c);
	out(u, IER, 0x34);
	assert_int_equal(in(u, RBR), 0x0c);
	assert_int_equal(in(u, IER), 0x34);
	/* Divisor writes are not transmitted. */
	serial_flush(&u->s);
	assert_string_equal(drain(u), "");
	/* DLAB off: THR and IER again, the divisor kept. */
	out(u, LCR, 0x03);
	assert_int_equal(in(u, IER), IER_RDI);
	out_str(u, "x\n");
	assert_string_equal(drain(u), "x\n");
	out(u, LCR, LCR_DLAB | 0x03);
	assert_int_equal(in(u, RBR), 0x0c);
	assert_int_equal(in(u, IER), 0x34);
}

static void test_bad_access(void **state)
{
	struct uart *u = *state;
	uint8_t buf[4] = { 0, 0, 0, 0 };

	/* Only byte accesses within the 8 registers. */
	serial_access(&u->s, LSR, buf, 2, false);
	assert_int_equal(buf[0], 0xff);
	assert_int_equal(buf[1], 0xff);
	serial_access(&u->s, 8, buf, 1, false);
	buf[0] = 0x77;
	serial_access(&u->s, SCR, buf, 4, true);
	serial_access(&u->s, 8, buf, 1, true);
	assert_int_equal(in(u, SCR), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lsr, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_scratch, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_loopback, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_iir, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_thri, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_rx, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_output_lines, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_output_long_line, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_dlab, uart_setup, uart_teardown),
		cmocka_unit_test_setup_teardown(test_bad_access, uart_setup, uart_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
