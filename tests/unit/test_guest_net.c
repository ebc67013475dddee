/* Unit tests for gantry-init's network settings (guest/netconf.c, net.c,
 * spec.c's binds), run on the host: the gantry.net= parser on good and bad
 * values, the resolv.conf, hosts and hostname it makes, those files written
 * under a state directory, the mountpoints made in a root without /etc, and
 * the read-only binds in config.json. The ioctls need a guest (tests/e2e/
 * test_net_guest.py). */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "guest/guest.h"
#include "guest/netconf.h"
#include "net/net.h"

#define NET_VALUE (NET_GUEST_CMDLINE + sizeof("gantry.net=") - 1)

static void test_parse_plan(void **state)
{
	struct netconf n;
	char why[NETCONF_WHY_MAX] = "";

	(void)state;
	assert_int_equal(strncmp(NET_GUEST_CMDLINE, "gantry.net=", 11), 0);
	assert_int_equal(netconf_parse(NET_VALUE, &n, why), 0);
	assert_true(n.on);
	assert_int_equal(n.addr, NET_GUEST);
	assert_int_equal(n.prefix, NET_PREFIX);
	assert_int_equal(netconf_mask(n.prefix), NET_NETMASK);
	assert_int_equal(n.gateway, NET_GATEWAY);
	assert_int_equal(n.dns, NET_GATEWAY);
}

static void test_parse_other_subnets(void **state)
{
	struct netconf n;
	char why[NETCONF_WHY_MAX], buf[16];

	(void)state;
	assert_int_equal(netconf_parse("10.0.0.5/8,10.255.255.254,1.1.1.1", &n, why), 0);
	assert_string_equal(netconf_ntoa(n.addr, buf), "10.0.0.5");
	assert_string_equal(netconf_ntoa(n.gateway, buf), "10.255.255.254");
	assert_string_equal(netconf_ntoa(n.dns, buf), "1.1.1.1");
	assert_int_equal(n.prefix, 8);
	assert_int_equal(netconf_parse("172.16.0.1/30,172.16.0.2,172.16.0.2", &n, why), 0);
	assert_int_equal(netconf_parse("100.64.0.10/1,0.0.0.1,9.9.9.9", &n, why), -1);
	assert_int_equal(netconf_mask(0), 0);
	assert_int_equal(netconf_mask(1), 0x80000000u);
	assert_int_equal(netconf_mask(32), 0xffffffffu);
}

static void test_parse_rejects(void **state)
{
	static const char *const bad[] = {
		"",
		"192.168.127.2",
		"192.168.127.2/24",
		"192.168.127.2/24,192.168.127.1",
		"192.168.127.2/24,192.168.127.1,",
		"192.168.127.2/24,192.168.127.1,192.168.127.1,",
		"192.168.127.2/24,192.168.127.1,192.168.127.1 ",
		" 192.168.127.2/24,192.168.127.1,192.168.127.1",
		"192.168.127.2/24,,192.168.127.1",
		"192.168.127.2/,192.168.127.1,192.168.127.1",
		"192.168.127.2/024,192.168.127.1,192.168.127.1",
		"192.168.127.02/24,192.168.127.1,192.168.127.1",
		"192.168.127.256/24,192.168.127.1,192.168.127.1",
		"192.168.127.2.1/24,192.168.127.1,192.168.127.1",
		"192.168.127/24,192.168.127.1,192.168.127.1",
		"192.168.127.2/24,192.168.127.1,1111.1.1.1",
		"192.168.127.2/24,192.168.127.1,4294967297",
		"0x7f.0.0.1/24,192.168.127.1,192.168.127.1",
		"192.168.127.+2/24,192.168.127.1,192.168.127.1",
		"192.168.127.-2/24,192.168.127.1,192.168.127.1",
		"192.168.127.2/24;192.168.127.1;192.168.127.1",
		"192.168.127.2/0,192.168.127.1,192.168.127.1",
		"192.168.127.2/31,192.168.127.3,192.168.127.1",
		"192.168.127.2/32,192.168.127.1,192.168.127.1",
		"192.168.127.2/33,192.168.127.1,192.168.127.1",
		"192.168.127.2/240,192.168.127.1,192.168.127.1",
		/* not a host of its subnet */
		"192.168.127.0/24,192.168.127.1,192.168.127.1",
		"192.168.127.255/24,192.168.127.1,192.168.127.1",
		"127.0.0.2/8,127.0.0.1,192.168.127.1",
		"0.0.0.2/8,0.0.0.1,192.168.127.1",
		"224.0.0.2/24,224.0.0.1,192.168.127.1",
		/* the gateway: ourselves, elsewhere, or no host */
		"192.168.127.2/24,192.168.127.2,192.168.127.1",
		"192.168.127.2/24,192.168.128.1,192.168.127.1",
		"192.168.127.2/24,192.168.127.0,192.168.127.1",
		"192.168.127.2/24,192.168.127.255,192.168.127.1",
		/* the DNS server */
		"192.168.127.2/24,192.168.127.1,0.0.0.0",
		"192.168.127.2/24,192.168.127.1,255.255.255.255",
		"192.168.127.2/24,192.168.127.1,224.0.0.251",
		"192.168.127.2/24,192.168.127.1,127.0.0.53",
		"given twice",
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct netconf n = { .on = true, .addr = 1 };
		char why[NETCONF_WHY_MAX] = "";

		if (netconf_parse(bad[i], &n, why) != -1)
			fail_msg("accepted \"%s\"", bad[i]);
		assert_false(n.on);
		assert_int_equal(n.addr, 0);
		assert_non_null(strstr(why, "gantry.net="));
		assert_null(strchr(why, '\n'));
	}
}

/* A value as long as the kernel allows still makes a bounded, one-line why. */
static void test_parse_long(void **state)
{
	char value[4096], why[NETCONF_WHY_MAX];
	struct netconf n;

	(void)state;
	memset(value, '1', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	assert_int_equal(netconf_parse(value, &n, why), -1);
	assert_true(strlen(why) < NETCONF_WHY_MAX);
}

static void test_hostname_valid(void **state)
{
	char long_name[NETCONF_HOST_MAX + 2];

	(void)state;
	assert_true(netconf_hostname_valid("gantry"));
	assert_true(netconf_hostname_valid("my-box.2_x"));
	assert_false(netconf_hostname_valid(""));
	assert_false(netconf_hostname_valid("-x"));
	assert_false(netconf_hostname_valid(".x"));
	assert_false(netconf_hostname_valid("a b"));
	assert_false(netconf_hostname_valid("a\tb"));
	assert_false(netconf_hostname_valid("a#b"));
	assert_false(netconf_hostname_valid("a/b"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_false(netconf_hostname_valid(long_name));
	long_name[NETCONF_HOST_MAX] = '\0';
	assert_true(netconf_hostname_valid(long_name));
}

static void test_files_networked(void **state)
{
	char why[NETCONF_WHY_MAX], buf[NETCONF_FILE_MAX];
	struct netconf n;
	int len;

	(void)state;
	assert_int_equal(netconf_parse(NET_VALUE, &n, why), 0);
	len = netconf_resolv(&n, buf, sizeof(buf));
	assert_int_equal(len, (int)strlen(buf));
	assert_string_equal(buf, "nameserver 192.168.127.1\noptions edns0\n");
	len = netconf_hosts(&n, "box", buf, sizeof(buf));
	assert_int_equal(len, (int)strlen(buf));
	assert_string_equal(buf, "127.0.0.1\tlocalhost\n"
				 "192.168.127.2\tbox\n"
				 "192.168.127.254\thost.gantry.internal host.docker.internal "
				 "host.containers.internal\n"
				 "192.168.127.1\tgateway.gantry.internal\n");
	assert_int_equal(netconf_hostname("box", buf, sizeof(buf)), 4);
	assert_string_equal(buf, "box\n");
	/* Too small: refused, not cut. */
	assert_int_equal(netconf_hosts(&n, "box", buf, 40), -1);
	assert_int_equal(netconf_resolv(&n, buf, 10), -1);
}

static void test_files_offline(void **state)
{
	struct netconf off = { 0 };
	char buf[NETCONF_FILE_MAX];
	int len;

	(void)state;
	assert_int_equal(netconf_resolv(&off, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	len = netconf_hosts(&off, "gantry", buf, sizeof(buf));
	assert_int_equal(len, (int)strlen(buf));
	assert_string_equal(buf, "127.0.0.1\tlocalhost gantry\n");
}

static char *slurp(const char *dir, const char *name)
{
	char path[GUEST_PATH_MAX], *buf = xzalloc(8192);
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	n = read(fd, buf, 8191);
	assert_true(n >= 0);
	close(fd);
	return buf;
}

static char *tmpdir(void)
{
	char *d = xstrdup("/tmp/gantry-guest-net-XXXXXX");

	assert_non_null(mkdtemp(d));
	return d;
}

static void rm_rf(const char *dir)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_write_etc(void **state)
{
	char *base = tmpdir(), statedir[256], why[NETCONF_WHY_MAX], *s;
	struct guest_config cfg = { .hostname = "box" };
	struct netconf n;

	(void)state;
	/* The state directory need not exist yet (the guest's /run/gantry). */
	snprintf(statedir, sizeof(statedir), "%s/state", base);
	cfg.state_dir = statedir;
	assert_int_equal(netconf_parse(NET_VALUE, &n, why), 0);
	assert_int_equal(net_write_etc(&cfg, &n), 0);
	assert_non_null(cfg.etc_dir);
	s = slurp(cfg.etc_dir, "resolv.conf");
	assert_string_equal(s, "nameserver 192.168.127.1\noptions edns0\n");
	free(s);
	s = slurp(cfg.etc_dir, "hosts");
	assert_non_null(strstr(s, "192.168.127.2\tbox\n"));
	free(s);
	s = slurp(cfg.etc_dir, "hostname");
	assert_string_equal(s, "box\n");
	free(s);

	/* Rewritten without a network: resolv.conf is empty but present. */
	n = (struct netconf){ 0 };
	assert_int_equal(net_write_etc(&cfg, &n), 0);
	s = slurp(cfg.etc_dir, "resolv.conf");
	assert_string_equal(s, "");
	free(s);
	s = slurp(cfg.etc_dir, "hosts");
	assert_string_equal(s, "127.0.0.1\tlocalhost box\n");
	free(s);
	rm_rf(base);
	free(base);
}

static void test_prepare_root(void **state)
{
	char *root = tmpdir(), path[256], link[256];
	struct stat st;
	FILE *f;

	(void)state;
	/* No /etc at all: a directory and three empty files. */
	net_prepare_root(root);
	for (size_t i = 0; net_etc_file(i); i++) {
		snprintf(path, sizeof(path), "%s/etc/%s", root, net_etc_file(i));
		assert_int_equal(lstat(path, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(st.st_size, 0);
	}
	assert_null(net_etc_file(3));

	/* What is there stays: a file keeps its bytes, a symlink stays one. */
	snprintf(path, sizeof(path), "%s/etc/hosts", root);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("image\n", f);
	fclose(f);
	snprintf(link, sizeof(link), "%s/etc/resolv.conf", root);
	unlink(link);
	assert_int_equal(symlink("../run/resolv.conf", link), 0);
	net_prepare_root(root);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 6);
	rm_rf(root);
	free(root);
}

static void test_spec_binds(void **state)
{
	char *base = tmpdir(), want[512], *s;
	struct guest_config cfg = { .hostname = "box", .rootfs = "/r", .nofile = 1024 };
	char *argv[] = { "true", NULL };
	struct proto_exec e = { .argv = argv, .argc = 1 };
	char *why = NULL;

	(void)state;
	/* Nothing generated: no binds. */
	assert_int_equal(spec_write(&cfg, base, &e, false, &why), 0);
	s = slurp(base, "config.json");
	assert_null(strstr(s, "/etc/"));
	free(s);

	cfg.etc_dir = "/run/gantry/etc";
	assert_int_equal(spec_write(&cfg, base, &e, false, &why), 0);
	s = slurp(base, "config.json");
	for (size_t i = 0; net_etc_file(i); i++) {
		snprintf(want, sizeof(want),
			 "{\"destination\":\"/etc/%s\",\"type\":\"bind\",\"source\":"
			 "\"/run/gantry/etc/%s\",\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\","
			 "\"noexec\"]}",
			 net_etc_file(i), net_etc_file(i));
		if (strstr(s, want) == NULL)
			fail_msg("no %s in %s", want, s);
	}
	assert_non_null(strstr(s, "\"hostname\":\"box\""));
	free(s);
	rm_rf(base);
	free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_plan),
		cmocka_unit_test(test_parse_other_subnets),
		cmocka_unit_test(test_parse_rejects),
		cmocka_unit_test(test_parse_long),
		cmocka_unit_test(test_hostname_valid),
		cmocka_unit_test(test_files_networked),
		cmocka_unit_test(test_files_offline),
		cmocka_unit_test(test_write_etc),
		cmocka_unit_test(test_prepare_root),
		cmocka_unit_test(test_spec_binds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
