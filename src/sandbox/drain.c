/* Reading a session's output to its end (see drain.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "common/util.h"
#include "sandbox/drain.h"

static void *drain_thread(void *opaque)
{
	struct drain *d = opaque;
	char chunk[65536];
	ssize_t n;

	while ((n = read(d->fd, chunk, sizeof(chunk))) > 0 || (n < 0 && errno == EINTR)) {
		size_t take = n > 0 ? MIN((size_t)n, d->max - d->len) : 0;

		memcpy(d->buf + d->len, chunk, take);
		d->len += take;
		d->over |= take < (size_t)MAX(n, 0);
	}
	return NULL;
}

int drain_start(struct drain *d, int fd, char *buf, size_t max)
{
	*d = (struct drain){ .fd = fd, .buf = buf, .max = max };
	d->started = pthread_create(&d->thread, NULL, drain_thread, d) == 0;
	return d->started ? 0 : -1;
}

void drain_join(struct drain *d)
{
	if (!d->started)
		return;
	pthread_join(d->thread, NULL);
	d->started = false;
	d->buf[d->len] = '\0';
}

void drain_join_line(struct drain *d)
{
	drain_join(d);
	if (d->buf == NULL)
		return;
	d->buf[d->len] = '\0';
	d->buf[strcspn(d->buf, "\n")] = '\0';
	text_sanitize(d->buf, 0);
}
