/* The guest's network, set up by gantry-init itself (no DHCP, no kernel
 * ip=): lo up in every guest; with gantry.net= (netconf.h) eth0's address,
 * netmask and default route by ioctl, before anything runs. The MTU is the
 * device's (virtio-net's MTU feature): the driver applies it, we only log
 * it. And the container's /etc/resolv.conf, hosts and hostname, generated
 * here and bound read-only by spec.c. */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest/guest.h"

#define NET_DEV "eth0" /* the one virtio-net device the VMM gives us */

static const char *const etc_files[] = { "resolv.conf", "hosts", "hostname" };

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void ifr_init(struct ifreq *ifr, const char *dev)
{
	memset(ifr, 0, sizeof(*ifr));
	snprintf(ifr->ifr_name, sizeof(ifr->ifr_name), "%s", dev);
}

static void sin_set(struct sockaddr *sa, uint32_t addr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };

	memcpy(sa, &sin, sizeof(sin));
}

static int if_set_up(int sock, const char *dev, bool up)
{
	struct ifreq ifr;

	ifr_init(&ifr, dev);
	if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
		return -1;
	if (up)
		ifr.ifr_flags |= IFF_UP;
	else
		ifr.ifr_flags &= ~IFF_UP;
	return ioctl(sock, SIOCSIFFLAGS, &ifr);
}

/* Address and netmask first, so that going up installs the subnet's route;
 * then the default route via the gateway. */
static int eth_configure(int sock, const struct netconf *n, const char **what)
{
	struct rtentry rt;
	struct ifreq ifr;

	ifr_init(&ifr, NET_DEV);
	sin_set(&ifr.ifr_addr, n->addr);
	*what = "set the address of " NET_DEV;
	if (ioctl(sock, SIOCSIFADDR, &ifr) < 0)
		return -1;
	ifr_init(&ifr, NET_DEV);
	sin_set(&ifr.ifr_netmask, netconf_mask(n->prefix));
	*what = "set the netmask of " NET_DEV;
	if (ioctl(sock, SIOCSIFNETMASK, &ifr) < 0)
		return -1;
	*what = "bring " NET_DEV " up";
	if (if_set_up(sock, NET_DEV, true) < 0)
		return -1;
	memset(&rt, 0, sizeof(rt));
	sin_set(&rt.rt_dst, 0);
	sin_set(&rt.rt_genmask, 0);
	sin_set(&rt.rt_gateway, n->gateway);
	rt.rt_flags = RTF_UP | RTF_GATEWAY;
	rt.rt_dev = (char *)NET_DEV;
	*what = "add the default route";
	return ioctl(sock, SIOCADDRT, &rt);
}

static int eth_mtu(int sock)
{
	struct ifreq ifr;

	ifr_init(&ifr, NET_DEV);
	return ioctl(sock, SIOCGIFMTU, &ifr) < 0 ? -1 : ifr.ifr_mtu;
}

void net_setup(const struct guest *g, const char *value, struct netconf *n)
{
	char why[NETCONF_WHY_MAX], addr[16], gw[16];
	uint64_t t0 = now_us();
	const char *what = NULL;
	int sock;

	*n = (struct netconf){ 0 };
	if (value && netconf_parse(value, n, why) < 0)
		guest_log("%s: no network", why);
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0) {
		guest_log("network: socket: %s", strerror(errno));
		n->on = false;
		return;
	}
	if (if_set_up(sock, "lo", true) < 0)
		guest_log("network: bring lo up: %s", strerror(errno));
	if (n->on && eth_configure(sock, n, &what) < 0) {
		guest_log("network: %s: %s; no network", what, strerror(errno));
		/* Down takes the subnet's route with it: no half-configured link. */
		if_set_up(sock, NET_DEV, false);
		n->on = false;
	}
	if (n->on)
		guest_debug(g, "network: %s %s/%u via %s, mtu %d, in %llu us", NET_DEV,
			    netconf_ntoa(n->addr, addr), n->prefix, netconf_ntoa(n->gateway, gw),
			    eth_mtu(sock), (unsigned long long)(now_us() - t0));
	else
		guest_debug(g, "network: lo only, in %llu us", (unsigned long long)(now_us() - t0));
	close(sock);
}

static int write_file(const char *dir, const char *name, const char *text, int len)
{
	char path[GUEST_PATH_MAX];
	int fd, r = 0;

	if (guest_pathf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return -1;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, text, (size_t)len) != len)
		r = -1;
	if (close(fd) < 0)
		r = -1;
	return r;
}

int net_write_etc(struct guest_config *cfg, const struct netconf *n)
{
	static char dir[GUEST_PATH_MAX];
	char text[3][NETCONF_FILE_MAX];
	int len[3];

	len[0] = netconf_resolv(n, text[0], sizeof(text[0]));
	len[1] = netconf_hosts(n, cfg->hostname, text[1], sizeof(text[1]));
	len[2] = netconf_hostname(cfg->hostname, text[2], sizeof(text[2]));
	if (len[0] < 0 || len[1] < 0 || len[2] < 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (guest_pathf(dir, sizeof(dir), "%s/etc", cfg->state_dir) < 0)
		return -1;
	if ((mkdir(cfg->state_dir, 0755) < 0 && errno != EEXIST) ||
	    (mkdir(dir, 0755) < 0 && errno != EEXIST))
		return -1;
	for (int i = 0; i < 3; i++)
		if (write_file(dir, etc_files[i], text[i], len[i]) < 0)
			return -1;
	cfg->etc_dir = dir;
	return 0;
}

/* Does etc/NAME lead somewhere inside the root, as the container would
 * resolve it? */
static bool resolves_in_root(int root, const char *name)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "etc/%s", name);
	fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	if (fd < 0)
		return errno != ENOENT;
	close(fd);
	return true;
}

/* crun would make missing mountpoints too, but this way an image without
 * /etc gets a plain directory and empty files in the writable upper layer,
 * whatever the runtime does. A symlink that resolves is left for crun to
 * follow within the root; a dangling one (resolv.conf into a resolver
 * daemon's /run) becomes an empty file, which the bind then covers. */
void net_prepare_root(const char *rootfs)
{
	int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC), etc;

	if (root < 0)
		return;
	if (mkdirat(root, "etc", 0755) < 0 && errno != EEXIST)
		guest_log("mkdir %s/etc: %s", rootfs, strerror(errno));
	etc = openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	for (size_t i = 0; etc >= 0 && i < sizeof(etc_files) / sizeof(etc_files[0]); i++) {
		const char *name = etc_files[i];
		struct stat st;
		int fd;

		if (fstatat(etc, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (!S_ISLNK(st.st_mode) || resolves_in_root(root, name))
				continue;
			if (unlinkat(etc, name, 0) < 0) {
				guest_log("unlink %s/etc/%s: %s", rootfs, name, strerror(errno));
				continue;
			}
		} else if (errno != ENOENT)
			continue;
		fd = openat(etc, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd < 0)
			guest_log("create %s/etc/%s: %s", rootfs, name, strerror(errno));
		else
			close(fd);
	}
	if (etc >= 0)
		close(etc);
	close(root);
}

const char *net_etc_file(size_t i)
{
	return i < sizeof(etc_files) / sizeof(etc_files[0]) ? etc_files[i] : NULL;
}
