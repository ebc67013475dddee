/* RENEW (proto/agent.h): the host restored this VM from a snapshot, so
 * the guest's view of the world is as old as the save, and a clone shares
 * its random state with every other clone of it. Before its workload goes
 * on, in order:
 *  - the host's entropy is added to the kernel's pool and the CRNG
 *    reseeded at once (RNDADDENTROPY, RNDRESEEDCRNG), so what
 *    /dev/urandom and getrandom() give next differs from any other clone;
 *  - the wall clock is set to the host's (the guest's clocks stood still
 *    while it was saved);
 *  - a clone's identity: a new hostname (the guest's, the container's,
 *    its etc/hostname and hosts) and, where the container has one, a new
 *    /etc/machine-id (the boot id is the kernel's, new at every boot
 *    only: a clone's stays its source's);
 *  - each share the new share server does not know is bound again in the
 *    container: the old bind detached, the dentries nobody holds dropped
 *    (the next lookup asks the new server), and the share bound anew from
 *    the hub. A share whose nodes the new server took from the save
 *    (share/carry.c) stays, with what the guest held open on it.
 * RENEWED says what was done and what failed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
#include "guest/netconf.h"
#include "guest/shares.h"

#define RENEW_WHY_MAX 512

/* "label: what" (or errno e's text) added to why, "; " between. */
static void why_add(char *why, const char *label, const char *what, int e)
{
	size_t n = strlen(why);

	if (n + 3 >= RENEW_WHY_MAX)
		return;
	snprintf(why + n, RENEW_WHY_MAX - n, "%s%s", n ? "; " : "", label);
	n = strlen(why);
	snprintf(why + n, RENEW_WHY_MAX - n, ": %s", e ? strerror(e) : what);
}

static bool renew_random(const uint64_t *words, char *why)
{
	struct {
		struct rand_pool_info info;
		uint32_t buf[PROTO_RENEW_WORDS * 2];
	} pool;
	int fd = open("/dev/urandom", O_RDWR | O_CLOEXEC);
	bool ok = false;

	pool.info.entropy_count = PROTO_RENEW_WORDS * 64;
	pool.info.buf_size = (int)sizeof(pool.buf);
	memcpy(pool.buf, words, sizeof(pool.buf));
	if (fd >= 0 && ioctl(fd, RNDADDENTROPY, &pool) == 0 && ioctl(fd, RNDRESEEDCRNG) == 0)
		ok = true;
	else
		why_add(why, "the random pool", NULL, errno);
	if (fd >= 0)
		close(fd);
	explicit_bzero(&pool, sizeof(pool));
	return ok;
}

static bool renew_clock(uint64_t ns, char *why)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
			       .tv_nsec = (long)(ns % 1000000000ull) };

	if (clock_settime(CLOCK_REALTIME, &ts) == 0)
		return true;
	why_add(why, "the clock", NULL, errno);
	return false;
}

/* In a child that joined the container's UTS and mount namespaces: its
 * hostname, and its /etc/machine-id rewritten if it has one (a symlink
 * there is the container's own business, not followed). */
static void __attribute__((noreturn)) identity_in_container(int uts, int mnt, const char *name,
							   const char *id)
{
	int fd;

	if (setns(uts, CLONE_NEWUTS) < 0 || setns(mnt, CLONE_NEWNS) < 0 ||
	    sethostname(name, strlen(name)) < 0)
		_exit(1);
	fd = open("/etc/machine-id", O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		_exit(errno == ENOENT ? 0 : 2);
	if (write(fd, id, strlen(id)) != (ssize_t)strlen(id) || close(fd) < 0)
		_exit(2);
	_exit(0);
}

static bool renew_identity(struct guest *g, const char *name, char *why)
{
	static char host[NETCONF_HOST_MAX + 1];
	char ns[64], id[34];
	uint8_t raw[16];
	int uts = -1, mnt = -1, status = 0;
	pid_t pid;

	if (!netconf_hostname_valid(name) || strlen(name) >= sizeof(host)) {
		why_add(why, "the hostname", "not a hostname", 0);
		return false;
	}
	snprintf(host, sizeof(host), "%s", name);
	g->cfg.hostname = host;
	if (sethostname(host, strlen(host)) < 0 || net_write_etc(&g->cfg, g->net) < 0) {
		why_add(why, "the hostname", NULL, errno);
		return false;
	}
	if (g->container <= 0)
		return true;
	/* The pool was reseeded just before: this id is the clone's own. */
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		why_add(why, "the machine id", NULL, errno);
		return false;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(id + 2 * i, 3, "%02x", raw[i]);
	id[32] = '\n';
	id[33] = '\0';
	snprintf(ns, sizeof(ns), "/proc/%d/ns/uts", (int)g->container);
	uts = open(ns, O_RDONLY | O_CLOEXEC);
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)g->container);
	mnt = open(ns, O_RDONLY | O_CLOEXEC);
	pid = uts >= 0 && mnt >= 0 ? fork() : -1;
	if (pid == 0)
		identity_in_container(uts, mnt, host, id);
	if (pid > 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	if (uts >= 0)
		close(uts);
	if (mnt >= 0)
		close(mnt);
	if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	why_add(why, "the container's hostname and machine id",
		pid < 0 ? NULL : "the helper failed", pid < 0 ? errno : 0);
	return false;
}

/* Each share whose server no longer knows it detached, the unused
 * dentries dropped, each bound again; one the restored server took up
 * (with the nodes and open files the guest had) stays as it is. */
static bool renew_shares(struct guest *g, char **values, uint32_t n, char *why)
{
	struct share sh[PROTO_MAX_SHARES];
	bool kept[PROTO_MAX_SHARES] = { false };
	char msg[MOUNTS_WHY_MAX];
	uint32_t k = 0, stale = 0;
	bool ok = true;
	int fd;

	for (uint32_t i = 0; i < n && k < PROTO_MAX_SHARES; i++) {
		char bad[SHARE_WHY_MAX];

		if (shares_parse(values[i], &sh[k], bad) < 0) {
			why_add(why, "a share", bad, 0);
			ok = false;
			continue;
		}
		k++;
	}
	for (uint32_t i = 0; i < k; i++) {
		kept[i] = mounts_check(g, sh[i].path, msg) == 0;
		if (!kept[i]) {
			mounts_unbind(g, sh[i].path, msg); /* none there is as good */
			stale++;
		}
	}
	fd = stale ? open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC) : -2;
	if (fd == -1 || (fd >= 0 && write(fd, "2\n", 2) != 2)) {
		why_add(why, "drop the old share nodes", NULL, errno);
		ok = false;
	}
	if (fd >= 0)
		close(fd);
	for (uint32_t i = 0; i < k; i++) {
		if (kept[i]) {
			free(sh[i].path);
			continue;
		}
		if (mounts_bind(g, sh[i].tag, sh[i].ro, sh[i].path, msg) != 0) {
			why_add(why, sh[i].tag, msg, 0);
			ok = false;
		}
		free(sh[i].path);
	}
	return ok;
}

void renew_request(struct guest *g, const struct proto_msg *m, uint32_t also)
{
	struct proto_msg r = { .type = PROTO_RENEWED };
	char why[RENEW_WHY_MAX] = "";
	uint32_t done = also;

	if (renew_random(m->u.renew.entropy, why))
		done |= PROTO_RENEWED_RANDOM;
	if (renew_clock(m->u.renew.time_ns, why))
		done |= PROTO_RENEWED_CLOCK;
	if (*m->u.renew.hostname && renew_identity(g, m->u.renew.hostname, why))
		done |= PROTO_RENEWED_ID;
	if (renew_shares(g, m->u.renew.shares, m->u.renew.nr_shares, why))
		done |= PROTO_RENEWED_SHARES;
	if (*m->u.renew.ca) {
		if (trust_renew(&g->cfg, m->u.renew.ca) == 0)
			done |= PROTO_RENEWED_CA;
		else
			why_add(why, "the egress CA", NULL, errno);
	}
	guest_debug(g, "renewed %#x%s%s", done, *why ? ": " : "", why);
	r.u.renewed.flags = done;
	r.u.renewed.message = why;
	link_send(g, &r);
}
