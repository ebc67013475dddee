/* Published-port specs (net/portspec.h) and the port lists built from them
 * (sandbox/network.h): what -p, sandbox.json and `gantry ports` accept,
 * their canonical form, and choosing a free host port. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/json.h"
#include "common/util.h"
#include "net/portspec.h"
#include "sandbox/network.h"

static void assert_canonical(const char *in, const char *want)
{
	char buf[PORT_SPEC_MAX];
	gantry_error_t err = NULL;
	struct port_spec p;

	if (port_spec_parse(in, &p, &err) < 0)
		fail_msg("`%s`: %s", in, gantry_error_str(err));
	port_spec_format(&p, buf);
	assert_string_equal(buf, want);
	/* The canonical form reads back as itself. */
	assert_int_equal(port_spec_parse(buf, &p, NULL), 0);
	port_spec_format(&p, buf);
	assert_string_equal(buf, want);
}

static void test_good(void **state)
{
	(void)state;
	assert_canonical("80", "127.0.0.1:0:80");
	assert_canonical("80/udp", "127.0.0.1:0:80/udp");
	assert_canonical("80/tcp", "127.0.0.1:0:80");
	assert_canonical("8080:80", "127.0.0.1:8080:80");
	assert_canonical("0:80", "127.0.0.1:0:80");
	assert_canonical("0.0.0.0:8080:80/udp", "0.0.0.0:8080:80/udp");
	assert_canonical("192.168.1.5:65535:1", "192.168.1.5:65535:1");
	assert_canonical("127.0.0.1:8080:80/tcp", "127.0.0.1:8080:80");
	assert_canonical("255.255.255.255:65535:65535/udp", "255.255.255.255:65535:65535/udp");
}

static void test_fields(void **state)
{
	struct port_spec p;

	(void)state;
	assert_int_equal(port_spec_parse("10.0.0.1:8080:81/udp", &p, NULL), 0);
	assert_int_equal(ntohl(p.host_ip.s_addr), 0x0a000001);
	assert_int_equal(p.host_port, 8080);
	assert_int_equal(p.guest_port, 81);
	assert_true(p.udp);
	assert_int_equal(port_spec_parse("443", &p, NULL), 0);
	assert_int_equal(ntohl(p.host_ip.s_addr), INADDR_LOOPBACK);
	assert_int_equal(p.host_port, 0);
	assert_int_equal(p.guest_port, 443);
	assert_false(p.udp);
}

static void test_bad(void **state)
{
	static const char *const bad[] = {
		"",
		"x",
		"/sctp",
		"80/sctp",
		"80/",
		"80/TCP",
		"70000:80",
		"8080:0",
		"0",
		"8080:70000",
		"8080:",
		":80",
		"[::1]:80:80",
		"1.2.3:80:80",
		"1.2.3.4.5:80:80",
		"localhost:80:80",
		":8080:80",
		"1.2.3.4:8080:80:90",
		"+80",
		"-80",
		" 80",
		"80 ",
		"080000",
		"123456",
		"1.2.3.4:80:80/udp/udp",
		"999.1.1.1:80:80",
		"1.2.3.4::80",
		"0x50",
		"255.255.255.255:65535:65535/udp-and-much-more-text-than-fits",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		gantry_error_t err = NULL;
		struct port_spec p;

		if (port_spec_parse(bad[i], &p, &err) == 0)
			fail_msg("`%s` was accepted", bad[i]);
		/* One line, that says what is wrong. */
		assert_non_null(err);
		assert_null(strchr(gantry_error_str(err), '\n'));
		gantry_error_free(&err);
	}
	assert_int_equal(port_spec_parse(NULL, &(struct port_spec){ 0 }, NULL), -1);
}

static void test_same_bind(void **state)
{
	struct port_spec a, b;

	(void)state;
	port_spec_parse("8080:80", &a, NULL);
	port_spec_parse("127.0.0.1:8080:81", &b, NULL);
	assert_true(port_spec_same_bind(&a, &b)); /* the guest port is not the bind */
	port_spec_parse("8080:80/udp", &b, NULL);
	assert_false(port_spec_same_bind(&a, &b));
	port_spec_parse("0.0.0.0:8080:80", &b, NULL);
	assert_false(port_spec_same_bind(&a, &b));
	port_spec_parse("8081:80", &b, NULL);
	assert_false(port_spec_same_bind(&a, &b));
}

/* A zero host port becomes one the kernel gave, bindable right after. */
static void test_pick(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct port_spec p, q;
	char buf[PORT_SPEC_MAX];
	int fd;

	(void)state;
	assert_int_equal(port_spec_parse("80", &p, NULL), 0);
	assert_int_equal(port_spec_pick(&p, NULL), 0);
	assert_int_not_equal(p.host_port, 0);
	port_spec_format(&p, buf);
	assert_int_equal(port_spec_parse(buf, &q, NULL), 0);
	assert_int_equal(q.host_port, p.host_port);
	sa.sin_addr = p.host_ip;
	sa.sin_port = htons(p.host_port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	/* A chosen port stays. */
	assert_int_equal(port_spec_parse("8080:80", &p, NULL), 0);
	assert_int_equal(port_spec_pick(&p, NULL), 0);
	assert_int_equal(p.host_port, 8080);
	/* An address not on this host: nothing to bind, an error that says so. */
	{
		gantry_error_t err = NULL;

		assert_int_equal(port_spec_parse("203.0.113.77:0:80/udp", &p, NULL), 0);
		assert_int_equal(port_spec_pick(&p, &err), -1);
		assert_non_null(strstr(gantry_error_str(err), "no free udp port on 203.0.113.77"));
		gantry_error_free(&err);
	}
}

/* -p lists: a bind twice is refused, zero host ports are each picked. */
static void test_lists(void **state)
{
	char **v = NULL;
	size_t n = 0;
	struct port_spec p;
	gantry_error_t err = NULL;

	(void)state;
	assert_int_equal(ports_add(&v, &n, "8080:80", NULL), 0);
	assert_int_equal(ports_add(&v, &n, "8080:80/udp", NULL), 0);
	assert_int_equal(ports_add(&v, &n, "80", NULL), 0);
	assert_int_equal(ports_add(&v, &n, "0:81", NULL), 0);
	assert_int_equal(ports_add(&v, &n, "127.0.0.1:8080:90", &err), -1);
	assert_non_null(strstr(gantry_error_str(err), "127.0.0.1:8080/tcp is already published"));
	gantry_error_free(&err);
	assert_int_equal(ports_add(&v, &n, "x", NULL), -1);
	assert_int_equal(n, 4);
	assert_string_equal(v[0], "127.0.0.1:8080:80");
	assert_string_equal(v[2], "127.0.0.1:0:80");
	assert_null(v[4]);
	assert_int_equal(ports_pick(v, n, NULL), 0);
	assert_string_equal(v[0], "127.0.0.1:8080:80");
	for (size_t i = 2; i < 4; i++) {
		assert_int_equal(port_spec_parse(v[i], &p, NULL), 0);
		assert_int_not_equal(p.host_port, 0);
	}
	assert_string_not_equal(v[2], v[3]);
	assert_int_equal(port_spec_parse("127.0.0.1:8080:1/udp", &p, NULL), 0);
	assert_int_equal(ports_find(v, n, &p), 1);
	{
		cleanup_free char *next = xstrdup(v[2]);

		ports_remove(v, &n, 1);
		assert_int_equal(n, 3);
		assert_int_equal(ports_find(v, n, &p), -1);
		assert_string_equal(v[1], next);
		assert_null(v[3]);
	}
	strv_free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good), cmocka_unit_test(test_fields),
		cmocka_unit_test(test_bad),  cmocka_unit_test(test_same_bind),
		cmocka_unit_test(test_pick), cmocka_unit_test(test_lists),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
