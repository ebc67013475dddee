/* Cancel tokens (see cancel.h). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/cancel.h"
#include "common/util.h"

int cancel_init(struct gantry_cancel *c, gantry_error_t *err)
{
	c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->fd < 0)
		return gantry_error_errno(err, "eventfd");
	return 0;
}

void cancel_destroy(struct gantry_cancel *c)
{
	close_fd(&c->fd);
}

void cancel_fire(struct gantry_cancel *c)
{
	uint64_t one = 1;

	/* Never read: the count stays above 0, the fd readable. */
	(void)!write(c->fd, &one, sizeof(one));
}

int cancel_fd(const struct gantry_cancel *c)
{
	return c ? c->fd : -1;
}

bool cancel_fired(const struct gantry_cancel *c)
{
	struct pollfd p = { .fd = cancel_fd(c), .events = POLLIN };

	return c && poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

int cancel_check(const struct gantry_cancel *c, gantry_error_t *err)
{
	if (cancel_fired(c))
		return gantry_error(err, ECANCELED, "cancelled");
	return 0;
}
