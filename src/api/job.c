/* A command to its end (job.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/job.h"
#include "common/util.h"

/* The exec's side: its ends of the pipes, closed when it returns. */
struct job_run {
	struct api_server *s;
	struct api_job *j;
	int in, out, err, sig;
	struct gantry_cancel cancel;
};

static void *job_thread(void *arg)
{
	struct job_run *t = arg;
	struct api_job *j = t->j;

	j->ret = t->s->b->exec(j->name, &j->x, t->in, t->out, t->err < 0 ? t->out : t->err, t->sig,
			       &t->cancel, &j->res, &j->e);
	close_fd(&t->in);
	close_fd(&t->out);
	close_fd(&t->err);
	return NULL;
}

/* SIGKILL through the session's signals (its cancel when that cannot
 * go); hung up API_KILL_GRACE_MS later if it lives on. */
static void end_it(struct job_run *t, int sig_w, uint64_t *hangup_at)
{
	const unsigned char sig = SIGKILL;

	if (*hangup_at)
		return;
	if (sig_w < 0 || write(sig_w, &sig, 1) != 1)
		cancel_fire(&t->cancel);
	*hangup_at = now_ms() + API_KILL_GRACE_MS;
}

/* One read of fd into *buf (up to max kept): false at its end (errno 0)
 * or on a failed read (errno set). */
static bool gather(int fd, char **buf, size_t *len, size_t *cap, size_t max, bool *over)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n == 0)
		errno = 0;
	if (n <= 0)
		return n < 0 && (errno == EAGAIN || errno == EINTR);
	if (*len + (size_t)n > max) {
		*over = true;
		return true;
	}
	if (*len + (size_t)n + 1 > *cap) {
		*cap = MAX(*cap * 2, *len + (size_t)n + 1);
		*buf = xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, chunk, (size_t)n);
	*len += (size_t)n;
	(*buf)[*len] = '\0';
	return true;
}

/* Feed stdin, gather the output, keep the clock, watch the client and
 * the server, until the outputs end. */
static void pump(struct api_server *s, struct api_job *j, struct job_run *t, int in_w, int out_r,
		 int err_r, int sig_w)
{
	size_t done = 0, out_cap = 0, err_cap = 0;
	uint64_t hangup_at = 0;
	bool over = false;

	j->end = API_JOB_DONE;
	while (out_r >= 0 || err_r >= 0) {
		struct pollfd p[5] = { { out_r, POLLIN, 0 },
				       { err_r, POLLIN, 0 },
				       { in_w, POLLOUT, 0 },
				       { cancel_fd(&s->cancel), POLLIN, 0 },
				       { j->conn_fd, POLLRDHUP, 0 } };
		uint64_t now = now_ms(), wake;

		if (j->end == API_JOB_DONE && now >= j->deadline) {
			j->end = API_JOB_TIMEOUT;
			end_it(t, sig_w, &hangup_at);
		}
		if (hangup_at && now >= hangup_at) {
			cancel_fire(&t->cancel);
			hangup_at = UINT64_MAX; /* once */
		}
		if (in_w >= 0 && done == j->in_len)
			close_fd(&in_w);
		p[2].fd = in_w;
		if (j->end != API_JOB_DONE) /* the server's end and the client matter no more */
			p[3].fd = p[4].fd = -1;
		/* Once it is being ended only the hang-up is waited for. */
		wake = j->end != API_JOB_DONE
			       ? (hangup_at && hangup_at != UINT64_MAX ? hangup_at : now + 1000)
			       : j->deadline;
		if (poll(p, 5, wake > now ? (int)MIN(wake - now, 1000u) : 0) < 0 &&
		    errno != EINTR) {
			cancel_fire(&t->cancel); /* and go on draining until its end */
			continue;
		}
		if (p[3].revents || (p[4].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
			j->end = p[3].revents ? API_JOB_STOPPING : API_JOB_GONE;
			end_it(t, sig_w, &hangup_at);
		}
		if (in_w >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t n = write(in_w, (const char *)j->in + done,
					  MIN(j->in_len - done, 65536));

			if (n > 0)
				done += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				close_fd(&in_w);
		}
		for (int i = 0; i < 2; i++) {
			int *fd = i ? &err_r : &out_r;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)) ||
			    gather(*fd, i ? &j->err : &j->out, i ? &j->err_len : &j->out_len,
				   i ? &err_cap : &out_cap, j->max, &over))
				continue;
			/* Its end, or a read that failed: then it is ended too. */
			if (errno != 0)
				cancel_fire(&t->cancel);
			close_fd(fd);
		}
		if (over && j->end == API_JOB_DONE) {
			j->end = API_JOB_OVER;
			end_it(t, sig_w, &hangup_at);
		}
	}
	close_fd(&in_w); /* and the outputs: closed at their ends */
}

int api_job_run(struct api_server *s, struct api_job *j, gantry_error_t *err)
{
	struct job_run t = { .s = s, .j = j, .in = -1, .out = -1, .err = -1, .sig = -1 };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, psig[2] = { -1, -1 };
	pthread_t thread;
	int ret = -1;

	t.cancel.fd = -1;
	j->out = j->err = NULL;
	j->out_len = j->err_len = 0;
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
	    (!j->merge && pipe2(perr, O_CLOEXEC) < 0) || pipe2(psig, O_CLOEXEC | O_NONBLOCK) < 0 ||
	    cancel_init(&t.cancel, err) < 0) {
		if (err && *err == NULL)
			gantry_error_errno(err, "pipe");
		goto out;
	}
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	fcntl(pout[0], F_SETFL, O_NONBLOCK);
	if (perr[0] >= 0)
		fcntl(perr[0], F_SETFL, O_NONBLOCK);
	t.in = steal_fd(&pin[0]);
	t.out = steal_fd(&pout[1]);
	t.err = steal_fd(&perr[1]);
	t.sig = psig[0];
	if (pthread_create(&thread, NULL, job_thread, &t) != 0) {
		close_fd(&t.in);
		close_fd(&t.out);
		close_fd(&t.err);
		gantry_error(err, EAGAIN, "cannot start a thread");
		goto out;
	}
	pump(s, j, &t, steal_fd(&pin[1]), steal_fd(&pout[0]), steal_fd(&perr[0]), psig[1]);
	pthread_join(thread, NULL);
	ret = 0;
out:
	cancel_destroy(&t.cancel);
	for (int i = 0; i < 2; i++) {
		close_fd(&pin[i]);
		close_fd(&pout[i]);
		close_fd(&perr[i]);
		close_fd(&psig[i]);
	}
	return ret;
}

void api_job_free(struct api_job *j)
{
	free(j->out);
	free(j->err);
	gantry_error_free(&j->e);
	j->out = j->err = NULL;
}
