/* A sandbox's use of the host (see stats.h). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"
#include "sandbox/network.h"
#include "sandbox/stats.h"

#define STATS_PIDS_MAX (1u << 22) /* the kernel's own pid_max limit */

struct proc {
	pid_t pid, ppid;
};

/* /proc/pid/stat's fields after the command (which may hold spaces and
 * parentheses: the last ')' ends it). */
static const char *stat_fields(pid_t pid, char *buf, size_t cap)
{
	char path[64];
	char *end;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, cap) < 0 || (end = strrchr(buf, ')')) == NULL)
		return NULL;
	return end + 2; /* ") S ..." */
}

/* Every process on the host with its parent, into *out (allocated);
 * how many. */
static size_t processes(struct proc **out)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0, cap = 1024;
	char buf[1024];

	*out = xmalloc(cap * sizeof(**out));
	if (d == NULL)
		return 0;
	while (n < STATS_PIDS_MAX && (e = readdir(d)) != NULL) {
		const char *f;
		int ppid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (n == cap) {
			cap *= 2;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		(*out)[n].pid = (pid_t)atoi(e->d_name);
		f = stat_fields((*out)[n].pid, buf, sizeof(buf));
		if (f && sscanf(f, "%*c %d", &ppid) == 1) {
			(*out)[n].ppid = (pid_t)ppid;
			n++;
		}
	}
	closedir(d);
	return n;
}

/* user + system time of pid, in ns. */
static uint64_t cpu_ns(pid_t pid)
{
	static long hz;
	unsigned long long ut, st;
	char buf[1024];
	const char *f = stat_fields(pid, buf, sizeof(buf));

	if (hz <= 0)
		hz = sysconf(_SC_CLK_TCK);
	/* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
	if (f == NULL || hz <= 0 ||
	    sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return (ut + st) * (1000000000ull / (unsigned long long)hz);
}

/* pid's proportional set size: what it alone holds, and its share of
 * what it shares (guest RAM is mapped by the VMM worker and the share
 * worker both); its resident set where smaps_rollup cannot be read. */
static uint64_t mem_bytes(pid_t pid)
{
	char path[64], buf[4096];
	unsigned long long kb, pages;
	const char *pss;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	if (read_small(path, buf, sizeof(buf)) > 0 && (pss = strstr(buf, "\nPss:")) != NULL &&
	    sscanf(pss, "\nPss: %llu kB", &kb) == 1)
		return kb << 10;
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	if (read_small(path, buf, sizeof(buf)) > 0 && sscanf(buf, "%*u %llu", &pages) == 1)
		return pages * (uint64_t)sysconf(_SC_PAGESIZE);
	return 0;
}

/* root and its descendants: CPU time, how many, and with mem their memory. */
static void tree(pid_t root, bool mem, struct sandbox_stats *st)
{
	struct proc *all;
	size_t n = processes(&all), head = 0, tail = 0;
	/* Each process at most once in the walk: n + 1 slots are enough. */
	pid_t *todo = xmalloc((n + 1) * sizeof(*todo));

	todo[tail++] = root;
	while (head < tail) {
		pid_t p = todo[head++];

		st->cpu_ns += cpu_ns(p);
		if (mem)
			st->mem_bytes += mem_bytes(p);
		st->pids++;
		for (size_t i = 0; i < n && tail <= n; i++)
			if (all[i].ppid == p && all[i].pid != root)
				todo[tail++] = all[i].pid;
	}
	free(todo);
	free(all);
}

/* The network's bytes each way: its counters' totals, or the sum of its
 * destinations' from a snapshot written before there were totals. */
static void net_bytes(const char *name, struct sandbox_stats *st)
{
	json_t *t = NULL, *totals, *d;
	size_t i;

	if (sandbox_net_traffic(name, &t, NULL) < 0)
		return;
	totals = json_object_get(t, "totals");
	if (json_is_object(totals)) {
		st->net_rx = (uint64_t)json_integer_value(json_object_get(totals, "rx_bytes"));
		st->net_tx = (uint64_t)json_integer_value(json_object_get(totals, "tx_bytes"));
	} else {
		json_array_foreach(json_object_get(t, "destinations"), i, d)
		{
			st->net_rx += (uint64_t)json_integer_value(json_object_get(d, "rx_bytes"));
			st->net_tx += (uint64_t)json_integer_value(json_object_get(d, "tx_bytes"));
		}
	}
	json_decref(t);
}

/* full: every figure; else only what the CPU share needs (running,
 * cpu_ns), for the first of two readings. */
static int stats_read(const char *name, bool full, struct sandbox_stats *st, gantry_error_t *err)
{
	cleanup_free char *dir = NULL;
	struct sandbox sb = { 0 };
	struct stat s;

	*st = (struct sandbox_stats){ 0 };
	if (sandbox_inspect(name, &sb, &dir, err) < 0)
		return -1;
	snprintf(st->name, sizeof(st->name), "%s", name);
	st->running = sb.state == SANDBOX_RUNNING && sb.pid > 0;
	st->mem_limit = sb.mem_mib << 20;
	if (st->running)
		tree((pid_t)sb.pid, full, st);
	if (!full) {
		sandbox_free(&sb);
		return 0;
	}
	if (sb.writable && sb.rwlayer && stat(sb.rwlayer, &s) == 0) {
		st->disk = true;
		st->disk_bytes = (uint64_t)s.st_blocks * 512;
		st->disk_limit = (uint64_t)s.st_size;
	}
	/* A one-shot's traffic has no supervisor to count it. */
	st->net = sb.net && !sb.transient;
	if (st->net)
		net_bytes(name, st);
	sandbox_free(&sb);
	return 0;
}

int sandbox_stats(const char *name, struct sandbox_stats *st, gantry_error_t *err)
{
	return stats_read(name, true, st, err);
}

int sandbox_stats_cpu(const char *name, struct sandbox_stats *st, gantry_error_t *err)
{
	return stats_read(name, false, st, err);
}

double sandbox_stats_cpu_percent(const struct sandbox_stats *st, const struct sandbox_stats *prev,
				 uint64_t wall_ns)
{
	if (prev == NULL || !st->running || !prev->running || wall_ns == 0 ||
	    st->cpu_ns < prev->cpu_ns)
		return -1;
	return (double)(st->cpu_ns - prev->cpu_ns) * 100.0 / (double)wall_ns;
}

json_t *sandbox_stats_json(const struct sandbox_stats *st, const struct sandbox_stats *prev,
			   uint64_t wall_ns)
{
	double cpu = sandbox_stats_cpu_percent(st, prev, wall_ns);
	json_t *o = json_pack("{s:s,s:b}", "name", st->name, "running", st->running);

#define SET_U64(key, v, when) \
	json_object_set_new(o, key, (when) ? json_integer((json_int_t)(v)) : json_null())
	json_object_set_new(o, "cpu_percent", cpu >= 0 ? json_real(cpu) : json_null());
	SET_U64("cpu_ns", st->cpu_ns, st->running);
	SET_U64("memory_bytes", st->mem_bytes, st->running);
	SET_U64("memory_limit_bytes", st->mem_limit, true);
	SET_U64("pids", st->pids, st->running);
	SET_U64("disk_bytes", st->disk_bytes, st->disk);
	SET_U64("disk_limit_bytes", st->disk_limit, st->disk);
	SET_U64("net_rx_bytes", st->net_rx, st->net);
	SET_U64("net_tx_bytes", st->net_tx, st->net);
#undef SET_U64
	return o;
}
