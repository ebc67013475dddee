/* Starting and asking the share worker (see shareworker.h): the caller's
 * side. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/child.h"
#include "common/util.h"
#include "sandbox/machine.h"
#include "sandbox/shareworker.h"
#include "worker/worker.h"
#include "share/spec.h"
#include "virtio/devices.h"

#define CTL_WAIT_MS 10000

static const char *const worker_env[] = { "GANTRY_LOG", CONFINE_SECCOMP_ENV, NULL };

static json_t *export_json(const struct share_spec *sp)
{
	json_t *masks = json_array();

	for (size_t i = 0; i < sp->nr_masks; i++)
		json_array_append_new(masks, json_pack("{s:s,s:b}", "rel", sp->masks[i].rel, "hide",
						       sp->masks[i].hide));
	return json_pack("{s:s,s:b,s:b,s:b,s:I,s:I,s:o}", "tag", sp->tag, "ro", sp->ro, "nogit",
			 sp->nogit, "map",
			 sp->ids, "uid", (json_int_t)sp->uid, "gid", (json_int_t)sp->gid, "masks",
			 masks);
}

/* One RPC socket per virtio-fs worker the VMM will run: the far ends to
 * h, the near ends to near (n of them into *nr). */
static int make_rpc(struct worker_handover *h, int *near, size_t *nr, gantry_error_t *err)
{
	unsigned int n;

	if (virtio_fs_threads(&n, err) < 0)
		return -1;
	for (unsigned int i = 0; i < n && i < SHARE_RPC_SOCKS_MAX; i++) {
		int p[2];

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0)
			return gantry_error_errno(err, "share worker: socketpair");
		near[(*nr)++] = p[0];
		worker_give(h, p[1], true);
	}
	return 0;
}

/* Spawn it, and send it c with h's fds; w->rpc holds the near ends. */
static int spawn(struct share_worker *w, enum confine_mode mode, json_t *c,
		 struct worker_handover *h, gantry_error_t *err)
{
	int r = make_rpc(h, w->rpc, &w->nr_rpc, err);

	/* It needs no network: an empty namespace of its own. */
	if (r == 0)
		r = worker_spawn(&(struct worker_spawn){ .role = SHARE_WORKER_ROLE,
							 .what = "share worker",
							 .mode = mode,
							 .extra_ns = CLONE_NEWNET,
							 .env = worker_env,
							 .log_fd = -1 },
				 &w->pid, &w->chan, err);
	if (r == 0) {
		json_object_set_new(c, "op", json_string("config"));
		json_object_set_new(c, "rpc", json_integer((json_int_t)w->nr_rpc));
		if (worker_send_json(w->chan, c, h->fds, h->n) < 0)
			r = gantry_error_errno(err, "share worker: send its configuration");
	}
	json_decref(c);
	worker_handover_close(h);
	return r;
}

static int request(struct share_worker *w, json_t *req, const int *fds, size_t nr_fds,
		   json_t **answer, gantry_error_t *err)
{
	bool eof;
	json_t *a;

	*answer = NULL;
	pthread_mutex_lock(&w->lock);
	a = w->chan >= 0 ? worker_request(w->chan, &w->next_id, req, fds, nr_fds, CTL_WAIT_MS, &eof)
			 : (json_decref(req), NULL);
	pthread_mutex_unlock(&w->lock);
	if (a == NULL)
		return gantry_error(err, 0, "the share worker did not answer");
	if (!json_is_true(json_object_get(a, "ok"))) {
		cleanup_free char *line = worker_line(a, "error", "refused");

		json_decref(a);
		return gantry_error(err, 0, "%s", line);
	}
	*answer = a;
	return 0;
}

int share_worker_start(struct share_worker *w, struct machine *m, gantry_error_t *err)
{
	struct worker_handover h = { .n = 0 };
	json_t *exports = json_array();

	for (size_t i = 0; i < m->nr_boot_shares; i++) {
		json_array_append_new(exports, export_json(&m->boot_shares[i].sp));
		worker_give(&h, m->boot_shares[i].fd, false);
	}
	return spawn(w, m->isolation,
		     json_pack("{s:b,s:o}", "live", m->shares_live, "exports", exports), &h, err);
}

int share_worker_start_behind(struct share_worker *w, struct share_worker *front,
			      const struct share_spec *sp, int root_fd, unsigned int route,
			      enum confine_mode mode, gantry_error_t *err)
{
	struct worker_handover h = { .n = 0 };
	json_t *req, *a;
	int r;

	worker_give(&h, root_fd, false);
	r = spawn(w, mode,
		  json_pack("{s:[o],s:I}", "exports", export_json(sp), "route", (json_int_t)route),
		  &h, err);
	if (r == 0)
		r = share_worker_ready(w, err);
	if (r < 0)
		return -1;
	/* The front worker takes our near ends: requests pass through it. */
	req = json_pack("{s:s,s:s,s:I}", "op", "attach", "tag", sp->tag, "route", (json_int_t)route);
	r = request(front, req, w->rpc, w->nr_rpc, &a, err);
	json_decref(a);
	share_worker_rpc_given(w);
	return r;
}

void share_worker_rpc_given(struct share_worker *w)
{
	for (size_t i = 0; i < w->nr_rpc; i++)
		if (w->rpc[i] >= 0)
			close(w->rpc[i]);
	w->nr_rpc = 0;
}

int share_worker_ready(struct share_worker *w, gantry_error_t *err)
{
	return worker_wait_ready(&w->pid, w->chan, SHARE_WORKER_READY_MS, "share worker",
				 &w->isolation, err);
}

int share_worker_rm(struct share_worker *w, const char *tag, bool force, gantry_error_t *err)
{
	json_t *a;
	int r = request(w, json_pack("{s:s,s:s,s:b}", "op", "rm", "tag", tag, "force", force), NULL,
			0, &a, err);

	json_decref(a);
	return r;
}

size_t share_worker_handles(struct share_worker *w, const char *tag)
{
	gantry_error_t err = NULL;
	json_t *a;
	size_t n = 0;

	if (request(w, json_pack("{s:s,s:s}", "op", "handles", "tag", tag), NULL, 0, &a, &err) == 0)
		n = (size_t)json_integer_value(json_object_get(a, "handles"));
	gantry_error_free(&err);
	json_decref(a);
	return n;
}

void share_worker_stop(struct share_worker *w)
{
	int status;

	share_worker_rpc_given(w);
	if (w->chan >= 0)
		close(w->chan);
	w->chan = -1;
	/* It ends at the hang-up; SIGKILL is its PDEATHSIG too. */
	if (w->pid > 0)
		kill(w->pid, SIGKILL);
	worker_reap(&w->pid, &status);
	json_decref(w->isolation);
	w->isolation = NULL;
}
