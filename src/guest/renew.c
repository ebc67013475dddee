/* RENEW (proto/agent.h): the host restored this VM from a snapshot, so
 * the guest's view of the world is as old as the save, and a clone shares
 * its random state with every other clone of it. Before its workload goes
 * on, in order:
 *  - the host's entropy is added to the kernel's pool and the CRNG
 *    reseeded at once (RNDADDENTROPY, RNDRESEEDCRNG), so what
 *    /dev/urandom and getrandom() give next differs from any other clone;
 *  - the wall clock is set to the host's (the guest's clocks stood still
 *    while it was saved);
 *  - each share is bound again in the container: the share server is a
 *    new one that knows none of the old nodes, so the old binds are
 *    detached, the dentries nobody holds dropped (the next lookup asks the
 *    new server), and the shares bound anew from the hub.
 * RENEWED says what was done and what failed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "guest/guest.h"
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

/* Each share detached, the unused dentries dropped, each bound again. */
static bool renew_shares(struct guest *g, char **values, uint32_t n, char *why)
{
	struct share sh[PROTO_MAX_SHARES];
	char msg[MOUNTS_WHY_MAX];
	uint32_t k = 0;
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
	for (uint32_t i = 0; i < k; i++)
		mounts_unbind(g, sh[i].path, msg); /* none there is as good */
	fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "2\n", 2) != 2) {
		why_add(why, "drop the old share nodes", NULL, errno);
		ok = false;
	}
	if (fd >= 0)
		close(fd);
	for (uint32_t i = 0; i < k; i++) {
		if (mounts_bind(g, sh[i].tag, sh[i].ro, sh[i].path, msg) != 0) {
			why_add(why, sh[i].tag, msg, 0);
			ok = false;
		}
		free(sh[i].path);
	}
	return ok;
}

void renew_request(struct guest *g, const struct proto_msg *m)
{
	struct proto_msg r = { .type = PROTO_RENEWED };
	char why[RENEW_WHY_MAX] = "";
	uint32_t done = 0;

	if (renew_random(m->u.renew.entropy, why))
		done |= PROTO_RENEWED_RANDOM;
	if (renew_clock(m->u.renew.time_ns, why))
		done |= PROTO_RENEWED_CLOCK;
	if (renew_shares(g, m->u.renew.shares, m->u.renew.nr_shares, why))
		done |= PROTO_RENEWED_SHARES;
	guest_debug(g, "renewed %#x%s%s", done, *why ? ": " : "", why);
	r.u.renewed.flags = done;
	r.u.renewed.message = why;
	link_send(g, &r);
}
