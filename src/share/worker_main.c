/* The share worker's own side (see worker.h): take the share roots
 * and the RPC sockets, build the server, confine ourselves, then map the
 * guest RAM the VMM worker sends and serve its requests, one thread per
 * socket, and the caller's share requests on the channel. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/json.h"
#include "common/log.h"
#include "common/unixsock.h"
#include "common/util.h"
#include "confine/confine.h"
#include "confine/vmm_filter.h"
#include "share/routes.h"
#include "share/rpc.h"
#include "share/server.h"
#include "share/worker.h"
#include "vmm/memory.h"
#include "worker/worker.h"

#define CONFIG_WAIT_MS 10000
#define MEM_SEALS      (F_SEAL_SHRINK | F_SEAL_SEAL)

struct sworker {
	struct confine_opts confine;
	struct fs_server *srv;
	int rpc[SHARE_RPC_SOCKS_MAX];
	size_t nr_rpc;
	uint8_t *mem; /* guest RAM, as the VMM worker maps it */
	uint64_t mem_size;
	bool ready_sent;
	unsigned int route; /* a worker behind another: its route (routes.h) */
	bool live;	    /* shares come while the guest runs, each behind us */
	struct share_routes *routes; /* live's, once guest RAM came */
};

static struct sworker sw;

static void send_json(json_t *j, const char *what)
{
	if (worker_send_json(WORKER_CHAN, j, NULL, 0) < 0)
		log_warn("%s: %s", what, strerror(errno));
}

/* ---- the caller's share requests ------------------------------------------------------- */

static json_t *answer(int r, gantry_error_t *err)
{
	json_t *a = json_pack("{s:b}", "ok", r == 0);

	if (r < 0)
		json_object_set_new(a, "error", json_string(gantry_error_str(*err)));
	gantry_error_free(err);
	return a;
}

/* An export's options, its masks found beneath fd, its root. */
static int export_opts(json_t *e, int fd, struct fs_export_opts *o, gantry_error_t *err)
{
	json_t *m;
	size_t i;

	*o = (struct fs_export_opts){
		.ro = json_is_true(json_object_get(e, "ro")),
		.no_git = json_is_true(json_object_get(e, "nogit")),
		.map_owner = json_is_true(json_object_get(e, "map")),
		.uid = (uid_t)json_integer_value(json_object_get(e, "uid")),
		.gid = (gid_t)json_integer_value(json_object_get(e, "gid")),
	};
	json_array_foreach(json_object_get(e, "masks"), i, m) {
		const char *rel = json_string_value(json_object_get(m, "rel"));

		if (rel == NULL)
			return gantry_error(err, 0, "configuration: a mask without a path");
		if (fs_export_mask(o, fd, rel, json_is_true(json_object_get(m, "hide")), err) < 0)
			return -1;
	}
	return 0;
}

/* A share added live: its worker's sockets, one for each request thread. */
static int attach(json_t *req, const char *tag, int *fds, size_t nr_fds, gantry_error_t *err)
{
	struct share_routes *t = __atomic_load_n(&sw.routes, __ATOMIC_ACQUIRE);
	json_int_t route = json_integer_value(json_object_get(req, "route"));

	if (t == NULL || route < 1 || route > FS_ROUTE_MAX)
		return gantry_error(err, EINVAL, t ? "a bad route" : "no guest memory yet");
	/* Taken (closed on error too): the caller's close them no more. */
	return share_routes_attach(t, sw.srv, tag, (unsigned int)route, fds, nr_fds, err);
}

static json_t *share_request(json_t *req, int *fds, size_t nr_fds)
{
	const char *op = json_string_value(json_object_get(req, "op"));
	const char *tag = json_string_value(json_object_get(req, "tag"));
	gantry_error_t err = NULL;
	int r;

	if (op == NULL || tag == NULL)
		return answer(gantry_error(&err, EINVAL, "a bad request"), &err);
	if (strcmp(op, "attach") == 0 && nr_fds == sw.nr_rpc) {
		r = attach(req, tag, fds, nr_fds, &err);
		for (size_t i = 0; i < nr_fds; i++)
			fds[i] = -1;
		return answer(r, &err);
	}
	if (strcmp(op, "rm") == 0 &&
	    share_routes_detach(__atomic_load_n(&sw.routes, __ATOMIC_ACQUIRE), sw.srv, tag))
		return answer(0, &err);
	if (strcmp(op, "rm") == 0) {
		r = fs_server_remove_export(sw.srv, tag, json_is_true(json_object_get(req, "force")),
					    &err);
		return answer(r, &err);
	}
	if (strcmp(op, "handles") == 0)
		return json_pack("{s:b,s:I}", "ok", true, "handles",
				 (json_int_t)fs_server_export_handles(sw.srv, tag));
	return answer(gantry_error(&err, EINVAL, "unknown request `%s`", op), &err);
}

/* Until the caller hangs up: then we end. */
static void serve_channel(void)
{
	for (;;) {
		int fds[UNIX_FDS_MAX];
		size_t n;
		bool eof;
		json_t *req = worker_recv_json_fds(WORKER_CHAN, -1, fds, ARRAY_SIZE(fds), &n, &eof);

		if (req == NULL) {
			if (eof)
				return;
			continue; /* a bad message is dropped */
		}
		send_json(worker_answer_to(req, share_request(req, fds, n)), "channel");
		for (size_t i = 0; i < n; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		json_decref(req);
	}
}

/* ---- the VMM worker's requests --------------------------------------------------------------- */

/* Guest RAM: a sealed memfd (it cannot shrink under us: a page gone
 * would be SIGBUS here), mapped shared, never executable. */
static int map_guest_ram(int sock)
{
	struct share_rpc_hdr h;
	struct statfs sf;
	struct stat st;
	int fd = -1, seals;
	size_t n = 0;
	ssize_t r;
	void *p;

	while ((r = unix_recv_fds(sock, &h, sizeof(h), &fd, 1, &n, 0)) < 0 && errno == EINTR)
		;
	if (r == 0) {
		/* The VMM went before its VM was made: its own error says why. */
		log_debug("the VMM closed its channel before sending guest memory");
		return -1;
	}
	if (r != (ssize_t)sizeof(h) || n != 1 || h.op != SHARE_RPC_MEM) {
		if (n)
			close(fd);
		log_error("no guest memory came");
		return -1;
	}
	seals = fcntl(fd, F_GET_SEALS);
	/* shmem, not hugetlbfs: a huge page missing at a first touch would
	 * end us with SIGBUS. */
	if (seals < 0 || (seals & MEM_SEALS) != MEM_SEALS || fstat(fd, &st) < 0 ||
	    st.st_size <= 0 || (uint64_t)st.st_size != h.len || fstatfs(fd, &sf) < 0 ||
	    sf.f_type != TMPFS_MAGIC) {
		close(fd);
		log_error("the guest memory is not a sealed memfd of its size");
		return -1;
	}
	/* As the VMM maps it: huge pages where the host offers them, so
	 * the server's copies fault once per 2 MiB, not per 4 KiB page. */
	p = guest_ram_map((uint64_t)st.st_size, fd, 0);
	if (p == NULL) {
		log_error("cannot map the guest memory: %s", strerror(errno));
		close(fd);
		return -1;
	}
	sw.mem = p;
	sw.mem_size = (uint64_t)st.st_size;
	/* Behind another worker, or serving a restored VM: its guest may
	 * be past INIT. */
	if (h.minor)
		fs_server_assume_init(sw.srv, h.minor);
	/* Each share added live gets guest RAM from us. */
	if (sw.live)
		__atomic_store_n(&sw.routes, share_routes_new(sw.nr_rpc, fd), __ATOMIC_RELEASE);
	if (!sw.live || sw.routes == NULL)
		close(fd);
	return 0;
}

static void *serve_rpc(void *arg)
{
	size_t thread = (size_t)(uintptr_t)arg;

	share_rpc_serve(sw.rpc[thread], thread, sw.mem, sw.mem_size, sw.srv,
			__atomic_load_n(&sw.routes, __ATOMIC_ACQUIRE));
	/* The VMM worker is gone, or broke the protocol: so are we. */
	_exit(0);
}

/* The first socket brings guest RAM; then one thread serves each. */
static void *rpc_main(void *arg)
{
	(void)arg;
	if (map_guest_ram(sw.rpc[0]) < 0)
		_exit(1);
	for (size_t i = 1; i < sw.nr_rpc; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, serve_rpc, (void *)(uintptr_t)i) != 0) {
			log_error("cannot start a request thread");
			_exit(1);
		}
	}
	return serve_rpc((void *)(uintptr_t)0);
}

/* ---- set-up ----------------------------------------------------------------------------- */

static int setup(json_t *c, int *fds, size_t nr_fds, gantry_error_t *err)
{
	json_t *exports = json_object_get(c, "exports"), *e;
	json_int_t rpc = json_integer_value(json_object_get(c, "rpc"));
	json_int_t route = json_integer_value(json_object_get(c, "route"));
	size_t i, next = 0;

	if (json_array_size(exports) > FS_MAX_EXPORTS || rpc < 1 || rpc > SHARE_RPC_SOCKS_MAX ||
	    json_array_size(exports) + (size_t)rpc != nr_fds || route < 0 || route > FS_ROUTE_MAX)
		return gantry_error(err, 0, "a bad configuration");
	sw.route = (unsigned int)route;
	sw.live = json_is_true(json_object_get(c, "live"));
	if (fs_server_new(&sw.srv, 0, sw.route, err) < 0)
		return gantry_error_prefix(err, "share server");
	json_array_foreach(exports, i, e) {
		struct fs_export_opts o;
		const char *tag = json_string_value(json_object_get(e, "tag"));
		int fd = fds[next++];

		if (tag == NULL)
			return gantry_error(err, 0, "configuration: a share without tag");
		if (export_opts(e, fd, &o, err) < 0 || fs_server_add_export(sw.srv, tag, fd, &o, err) < 0)
			return gantry_error_prefix(err, "share `%s`", tag);
		/* Kept for Landlock's rules (the server holds its own copy). */
		sw.confine.dirs[sw.confine.nr_dirs++] = (struct confine_dir){ fd, o.ro };
	}
	for (i = 0; i < (size_t)rpc; i++)
		sw.rpc[sw.nr_rpc++] = fds[next++];
	/* Its nodes hold fds: the limit it sized itself by stays. */
	sw.confine.nofile = MAX(sw.confine.nofile, (rlim_t)fs_server_fds_wanted(sw.srv));
	return 0;
}

static int load_filter(void *opaque, bool log, gantry_error_t *err)
{
	(void)opaque;
	return confine_filter_share(log, err);
}

static int parse_args(int argc, char **argv, bool *self_test)
{
	if (confine_args(&sw.confine, argc, argv, self_test) < 0)
		return -1;
	sw.confine.role = "share";
	sw.confine.threads = true;
	sw.confine.proc_fds = true;
	sw.confine.nofile = SHARE_WORKER_NOFILE;
	sw.confine.opens_files = true;
	sw.confine.load_filter = load_filter;
	return 0;
}

static int run(gantry_error_t *err)
{
	int fds[UNIX_FDS_MAX];
	size_t n;
	bool eof;
	json_t *c, *report;
	pthread_t t;
	int r;

	c = worker_recv_json_fds(WORKER_CHAN, CONFIG_WAIT_MS, fds, ARRAY_SIZE(fds), &n, &eof);
	if (c == NULL)
		return gantry_error(err, 0, "no configuration came");
	r = setup(c, fds, n, err);
	json_decref(c);
	if (r < 0)
		return -1;
	report = confine_run(&sw.confine, err);
	if (report == NULL && *err)
		return -1;
	/* Landlock has them: the server holds its own copies. */
	for (size_t i = 0; i < sw.confine.nr_dirs; i++)
		close(sw.confine.dirs[i].fd);
	sw.confine.nr_dirs = 0;
	/* After confine_run: a thread has the layers of the one that starts it. */
	if (pthread_create(&t, NULL, rpc_main, NULL) != 0) {
		json_decref(report);
		return gantry_error(err, 0, "cannot start the request threads");
	}
	send_json(worker_ready_msg(NULL, report), "channel");
	json_decref(report);
	sw.ready_sent = true;
	serve_channel();
	return 0;
}

int share_worker_main(int argc, char **argv)
{
	gantry_error_t err = NULL;
	bool self;
	int rc;

	log_init("share-worker", -1);
	/* Started by hand: started again as a sandbox starts it. */
	if ((rc = confine_self_test_again(argc, argv, SHARE_WORKER_ROLE, CLONE_NEWNET)) >= 0)
		return rc;
	if (parse_args(argc, argv, &self) < 0) {
		log_error("%s is for Gantry's own use", SHARE_WORKER_ROLE);
		return 2;
	}
	if (self)
		return confine_self_test(&sw.confine);
	/* We die with the caller. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Every file we make gets the mode the guest asked for (meta.c):
	 * no umask of ours takes bits of it, nor costs a chmod after. */
	umask(0);
	/* Our own /proc/self/fd in the root to be, before anything is open. */
	confine_root_prepare(&sw.confine);
	if (run(&err) < 0 && !sw.ready_sent)
		send_json(worker_ready_msg(gantry_error_str(err), NULL),
			  "channel");
	gantry_error_free(&err);
	/* The threads and the server go with the process. */
	_exit(0);
}
