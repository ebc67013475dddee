/* `gantry stats [--json] [--watch] [NAME...]`: what sandboxes use of the
 * host (sandbox/stats.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

#define STATS_SAMPLE_MS 1000 /* between the two readings a CPU share needs */
#define STATS_NAMES_MAX 256

static void stats_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry stats [--json] [--watch] [NAME...]\n\n"
		"Show what each sandbox uses of the host (every running one without NAME):\n"
		"CPU (its supervisor and workers, the vCPUs included, over one second; 100%% is\n"
		"one CPU busy), memory (their proportional set size, the guest's RAM as the\n"
		"host holds it, against the guest's memory), the writable layer's blocks on\n"
		"disk against its size, the network's bytes in and out this boot, and its\n"
		"processes. A stopped sandbox shows its disk and last network counts.\n"
		"--watch shows them again every 2 seconds until interrupted (as docker stats\n"
		"does); --json prints one JSON array a reading, null for what is not known.\n\n"
		"Flags:\n");
	flags_usage(out, flags);
}

static void human(char *buf, size_t cap, uint64_t v)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)v;
	size_t u = 0;

	while (d >= 1024 && u + 1 < ARRAY_SIZE(units)) {
		d /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f%s" : "%.0f%s", d, units[u]);
}

static void row(const struct sandbox_stats *st, const struct sandbox_stats *prev, uint64_t wall)
{
	char cpu[16] = "-", mem[48] = "-", disk[48] = "-", net[48] = "-", pids[16] = "-", a[16],
	     b[16];
	double pc = sandbox_stats_cpu_percent(st, prev, wall);

	if (pc >= 0)
		snprintf(cpu, sizeof(cpu), "%.1f%%", pc);
	if (st->running) {
		human(a, sizeof(a), st->mem_bytes);
		human(b, sizeof(b), st->mem_limit);
		snprintf(mem, sizeof(mem), "%s / %s", a, b);
		snprintf(pids, sizeof(pids), "%u", st->pids);
	}
	if (st->disk) {
		human(a, sizeof(a), st->disk_bytes);
		human(b, sizeof(b), st->disk_limit);
		snprintf(disk, sizeof(disk), "%s / %s", a, b);
	}
	if (st->net) {
		human(a, sizeof(a), st->net_rx);
		human(b, sizeof(b), st->net_tx);
		snprintf(net, sizeof(net), "%s / %s", a, b);
	}
	printf("%-20s %-8s %-8s %-22s %-22s %-22s %s\n", st->name,
	       st->running ? "running" : "stopped", cpu, mem, disk, net, pids);
}

/* The sandboxes to show: the names given, else every running one. */
static size_t names_of(int argc, char **argv, char **names, size_t max, gantry_error_t *err)
{
	struct sandbox *v;
	size_t n = 0, count;

	if (argc > 0) {
		for (int i = 0; i < argc && n < max; i++)
			names[n++] = xstrdup(argv[i]);
		return n;
	}
	if (sandbox_list(&v, &count, err) < 0)
		return (size_t)-1;
	for (size_t i = 0; i < count && n < max; i++)
		if (v[i].state == SANDBOX_RUNNING)
			names[n++] = xstrdup(v[i].name);
	sandbox_list_free(v, count);
	return n;
}

/* One reading of each, sampled over STATS_SAMPLE_MS; 0, or 1 when one of
 * them failed (printed). */
static int once(char **names, size_t n, bool as_json, bool clear)
{
	struct sandbox_stats *a = xzalloc((n + 1) * sizeof(*a)), *b = xzalloc((n + 1) * sizeof(*b));
	bool *ok = xzalloc((n + 1) * sizeof(*ok));
	gantry_error_t err = NULL;
	double t0;
	uint64_t wall;
	int status = 0;

	t0 = now_ms_frac();
	for (size_t i = 0; i < n; i++) {
		ok[i] = sandbox_stats_cpu(names[i], &a[i], &err) == 0;
		if (!ok[i])
			status = cli_fail(&err, CLI_EXIT_FAILED);
	}
	usleep(STATS_SAMPLE_MS * 1000);
	for (size_t i = 0; i < n; i++) {
		if (ok[i] && sandbox_stats(names[i], &b[i], &err) < 0) {
			ok[i] = false;
			status = cli_fail(&err, CLI_EXIT_FAILED);
		}
	}
	wall = (uint64_t)((now_ms_frac() - t0) * 1e6);
	if (as_json) {
		json_t *arr = json_array();

		for (size_t i = 0; i < n; i++)
			if (ok[i])
				json_array_append_new(arr, sandbox_stats_json(&b[i], &a[i], wall));
		cli_print_json(arr);
		json_decref(arr);
	} else {
		if (clear)
			fputs("\033[H\033[2J", stdout);
		printf("%-20s %-8s %-8s %-22s %-22s %-22s %s\n", "NAME", "STATE", "CPU", "MEM / LIMIT",
		       "DISK / SIZE", "NET RX / TX", "PIDS");
		for (size_t i = 0; i < n; i++)
			if (ok[i])
				row(&b[i], &a[i], wall);
	}
	fflush(stdout);
	free(ok);
	free(a);
	free(b);
	return status;
}

int cmd_stats(int argc, char **argv)
{
	bool as_json = false, watch = false, help = false;
	char *pos[STATS_NAMES_MAX], *names[STATS_NAMES_MAX];
	gantry_error_t err = NULL;
	int npos, r;
	size_t n;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "watch", FLAG_BOOL, &watch, NULL, NULL, "show them again every 2 s", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_mixed("stats", flags, argc, argv, pos, STATS_NAMES_MAX, &npos, stats_usage);
	if (r <= 0)
		return -r;
	for (int i = 0; i < npos; i++)
		if (sandbox_name_check(pos[i], &err) < 0)
			return cli_fail(&err, CLI_EXIT_FAILED);
	for (;;) {
		n = names_of(npos, pos, names, STATS_NAMES_MAX, &err);
		if (n == (size_t)-1)
			return cli_fail(&err, CLI_EXIT_FAILED);
		r = once(names, n, as_json, watch && !as_json && isatty(STDOUT_FILENO));
		for (size_t i = 0; i < n; i++)
			free(names[i]);
		if (!watch)
			return r;
		sleep(1); /* with the sample: a reading every 2 s */
	}
}
