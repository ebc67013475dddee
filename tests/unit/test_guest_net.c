/* Unit tests for gantry-init's network settings (guest/netconf.c, net.c,
 * spec.c's binds), run on the host: the gantry.net= parser on good and bad
 * values, the resolv.conf, hosts and hostname it makes, those files written
 * under a state directory, the mountpoints made in a root without /etc, and
 * the read-only binds in config.json; and, as root, the ioctls in a network
 * namespace of the test's own whose eth0 is a veth device (the guest's
 * virtio-net is tests/e2e/test_net_guest.py's). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "skip.h"

#include "common/util.h"
#include "guest/guest.h"
#include "guest/netconf.h"
#include "net/net.h"

#define NET_VALUE (&NET_GUEST_CMDLINE[sizeof("gantry.net=") - 1])

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
	assert_true(netconf_hostname_valid(".x"));
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

	/* What is there stays: a file keeps its bytes, a symlink that resolves
	 * in the root (absolute: from the root, not the host's /) stays one. */
	snprintf(path, sizeof(path), "%s/etc/hosts", root);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("image\n", f);
	fclose(f);
	snprintf(link, sizeof(link), "%s/etc/resolv.conf", root);
	unlink(link);
	assert_int_equal(symlink("/etc/hosts", link), 0);
	net_prepare_root(root);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 6);

	/* A dangling one becomes an empty file; the host's /etc/passwd does
	 * not count as its target. */
	unlink(link);
	assert_int_equal(symlink("../run/systemd/resolve/stub-resolv.conf", link), 0);
	snprintf(path, sizeof(path), "%s/etc/hostname", root);
	unlink(path);
	assert_int_equal(symlink("/etc/passwd", path), 0);
	net_prepare_root(root);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_size, 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
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

#define NETNS_SKIP 77

static bool if_flags_up(int sock, const char *dev)
{
	struct ifreq ifr = { 0 };

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	return ioctl(sock, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags & IFF_UP);
}

static uint32_t if_addr(int sock, const char *dev, unsigned long req)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in sin;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", dev);
	if (ioctl(sock, req, &ifr) < 0)
		return 0;
	memcpy(&sin, &ifr.ifr_addr, sizeof(sin));
	return ntohl(sin.sin_addr.s_addr);
}

/* The default route, as /proc/net/route prints it (a __be32 in hex). */
static bool has_default_route(const char *dev, uint32_t gateway)
{
	char line[256], want[64];
	FILE *f = fopen("/proc/self/net/route", "r");
	bool found = false;

	if (f == NULL)
		return false;
	snprintf(want, sizeof(want), "%s\t00000000\t%08X\t", dev, htonl(gateway));
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, want, strlen(want)) == 0)
			found = true;
	fclose(f);
	return found;
}

#define CHILD_CHECK(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond);                \
			_exit(1);                                                                  \
		}                                                                                  \
	} while (0)

/* In a fresh network namespace: lo is down, and eth0 (when make_eth0) one
 * end of a veth pair with the guest's MTU, its peer up so it has a carrier. */
static void netns_enter(bool make_eth0)
{
	if (unshare(CLONE_NEWNET) < 0)
		_exit(NETNS_SKIP);
	if (make_eth0 && system("ip link add eth0 mtu 65520 type veth peer name peer0 && "
				"ip link set peer0 up") != 0)
		_exit(NETNS_SKIP);
}

static void netns_child(int which)
{
	static struct guest g = { .cfg = { .debug = true } };
	struct netconf n;
	int sock;

	netns_enter(which != 2);
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHILD_CHECK(sock >= 0);
	CHILD_CHECK(!if_flags_up(sock, "lo"));
	switch (which) {
	case 0: /* the plan's settings */
		net_setup(&g, NET_VALUE, &n);
		CHILD_CHECK(n.on);
		CHILD_CHECK(if_flags_up(sock, "eth0"));
		CHILD_CHECK(if_addr(sock, "eth0", SIOCGIFADDR) == NET_GUEST);
		CHILD_CHECK(if_addr(sock, "eth0", SIOCGIFNETMASK) == NET_NETMASK);
		CHILD_CHECK(if_addr(sock, "eth0", SIOCGIFBRDADDR) == NET_BROADCAST);
		CHILD_CHECK(has_default_route("eth0", NET_GATEWAY));
		break;
	case 1: /* no gantry.net=, or a bad one: eth0 untouched */
		net_setup(&g, NULL, &n);
		CHILD_CHECK(!n.on);
		net_setup(&g, "192.168.127.2/24,192.168.127.2,192.168.127.1", &n);
		CHILD_CHECK(!n.on);
		CHILD_CHECK(!if_flags_up(sock, "eth0"));
		CHILD_CHECK(if_addr(sock, "eth0", SIOCGIFADDR) == 0);
		CHILD_CHECK(!has_default_route("eth0", NET_GATEWAY));
		break;
	case 2: /* asked for, but there is no eth0 */
		net_setup(&g, NET_VALUE, &n);
		CHILD_CHECK(!n.on);
		break;
	}
	CHILD_CHECK(if_flags_up(sock, "lo"));
	CHILD_CHECK(if_addr(sock, "lo", SIOCGIFADDR) == 0x7f000001);
	_exit(0);
}

static void netns_run(int which)
{
	int status;
	pid_t pid;

	if (geteuid() != 0)
		skip_because("needs root for a network namespace of its own");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		netns_child(which);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == NETNS_SKIP)
		skip_because("no network namespace with a veth eth0 here (unshare, ip link)");
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_setup_eth0(void **state)
{
	(void)state;
	netns_run(0);
}

static void test_setup_no_net(void **state)
{
	(void)state;
	netns_run(1);
}

static void test_setup_no_device(void **state)
{
	(void)state;
	netns_run(2);
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
		cmocka_unit_test(test_setup_eth0),
		cmocka_unit_test(test_setup_no_net),
		cmocka_unit_test(test_setup_no_device),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
