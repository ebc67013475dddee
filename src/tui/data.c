/* What the dashboard's pages show, read through the lifecycle library
 * (tui.h). Each page is a table of cells; a sandbox's files that do not
 * read leave its rows out, never the page. Every string is made safe to
 * draw here (tui_cell), whatever wrote it: a guest's DNS names and
 * refusal reasons, a user's image names. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/files.h"
#include "common/json.h"
#include "common/util.h"
#include "confine/confine.h"
#include "sandbox/lifecycle.h"
#include "secret/spec.h"
#include "share/spec.h"
#include "tui/tui.h"

char *tui_cell(const char *s)
{
	size_t n = s ? strnlen(s, TUI_CELL_MAX) : 0;
	char *out = xmalloc(n + 1);

	for (size_t i = 0; i < n; i++)
		out[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	out[n] = '\0';
	return out;
}

/* A row of cells from strings (NULL: "-"), about sandbox (may be NULL):
 * the row, for its key. */
static struct tui_row *row_add(struct tui_table *t, const char *sandbox, size_t ncells, ...)
{
	static struct tui_row none;
	struct tui_row *r;
	va_list ap;

	if (t->n >= TUI_MAX_ROWS) {
		memset(&none, 0, sizeof(none));
		return &none;
	}
	t->rows = xrealloc(t->rows, (t->n + 1) * sizeof(*t->rows));
	r = &t->rows[t->n++];
	memset(r, 0, sizeof(*r));
	r->sandbox = sandbox ? xstrdup(sandbox) : NULL;
	va_start(ap, ncells);
	for (size_t i = 0; i < ncells && i < TUI_MAX_COLS; i++) {
		const char *s = va_arg(ap, const char *);

		r->cells[i] = tui_cell(s ? s : "-");
	}
	va_end(ap);
	return r;
}

/* What an action on r names, kept exact (never drawn). */
static void row_key(struct tui_row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void row_key(struct tui_row *r, const char *fmt, ...)
{
	va_list ap;

	if (r->cells[0] == NULL)
		return; /* the page is full: not kept */
	va_start(ap, fmt);
	if (vasprintf(&r->key, fmt, ap) < 0)
		r->key = NULL;
	va_end(ap);
}

static void size_str(unsigned long long n, char *buf, size_t len)
{
	static const char units[] = "BKMGT";
	double v = (double)n;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%lluB", n);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

/* How long ago t was: 42s, 5m, 3h, 2d. */
static void ago(time_t t, time_t now, char *buf, size_t len)
{
	long d = (long)difftime(now, t);

	if (d < 0)
		d = 0;
	if (d < 60)
		snprintf(buf, len, "%lds", d);
	else if (d < 3600)
		snprintf(buf, len, "%ldm", d / 60);
	else if (d < 86400)
		snprintf(buf, len, "%ldh", d / 3600);
	else
		snprintf(buf, len, "%ldd", d / 86400);
}

/* The same of an RFC 3339 UTC time ("-" when it does not read). */
static void age_str(const char *when, time_t now, char *buf, size_t len)
{
	struct tm tm = { 0 };

	if (when == NULL || strptime(when, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		snprintf(buf, len, "-");
	else
		ago(timegm(&tm), now, buf, len);
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* When process pid started, in seconds since the epoch (0: unknown). */
static time_t started_at(long pid)
{
	char buf[256], state;
	unsigned long long ticks, btime = 0;
	FILE *f;

	if (proc_start((pid_t)pid, &ticks, &state) < 0)
		return 0;
	f = fopen("/proc/stat", "re");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	if (f)
		fclose(f);
	return btime ? (time_t)(btime + ticks / (unsigned long long)sysconf(_SC_CLK_TCK)) : 0;
}

/* The running sandbox's CPU share since the last reading cpu kept, in
 * percent of one CPU ("-" at the first), and the reading kept. */
static void cpu_share(struct tui_cpu *cpu, const char *name, char *buf, size_t len)
{
	struct sandbox_stats st, prev = { 0 };
	struct timespec ts;
	gantry_error_t err = NULL;
	struct tui_cpu_one *one = NULL;
	uint64_t now;
	double pct = -1;

	snprintf(buf, len, "-");
	if (cpu == NULL || sandbox_stats_cpu(name, &st, &err) < 0) {
		gantry_error_free(&err);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	for (size_t i = 0; i < cpu->n && one == NULL; i++)
		if (strcmp(cpu->v[i].name, name) == 0)
			one = &cpu->v[i];
	if (one) {
		prev.running = true;
		prev.cpu_ns = one->cpu_ns;
		pct = sandbox_stats_cpu_percent(&st, &prev, now - one->at_ns);
	} else {
		cpu->v = xrealloc(cpu->v, (cpu->n + 1) * sizeof(*cpu->v));
		one = &cpu->v[cpu->n++];
		snprintf(one->name, sizeof(one->name), "%s", name);
	}
	one->cpu_ns = st.cpu_ns;
	one->at_ns = now;
	if (pct >= 0)
		snprintf(buf, len, "%.0f%%", pct);
}

void tui_cpu_free(struct tui_cpu *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static void sandbox_row(struct tui_data *d, const struct sandbox *sb, struct tui_cpu *cpu)
{
	char cpus[24], mem[32], age[24], ports[24], share[24] = "-", up[24] = "-";
	time_t t0;

	if (sb->state == SANDBOX_RUNNING && !sb->transient) {
		cpu_share(cpu, sb->name, share, sizeof(share));
		if (sb->pid > 0 && (t0 = started_at(sb->pid)) > 0)
			ago(t0, d->now, up, sizeof(up));
	}
	snprintf(cpus, sizeof(cpus), "%llu", (unsigned long long)sb->cpus);
	snprintf(mem, sizeof(mem), "%lluM", (unsigned long long)sb->mem_mib);
	age_str(sb->created, d->now, age, sizeof(age));
	snprintf(ports, sizeof(ports), "%zu", sb->nr_ports);
	struct tui_row *r;

	r = row_add(&d->pages[TUI_SANDBOXES], sb->name, 10, sb->name, sandbox_shown_state(sb), share,
		    cpus, mem, up, age, confine_mode_name(sb->isolation), sb->nr_ports ? ports : "-",
		    sb->image);
	r->running = sb->state == SANDBOX_RUNNING && !sb->transient;
	r->paused = r->running && sb->paused;
}

static void traffic_rows(struct tui_data *d, const struct sandbox *sb)
{
	json_t *j = NULL, *v;
	gantry_error_t err = NULL;
	size_t i;

	if (!sb->net || sandbox_net_traffic(sb->name, &j, &err) < 0) {
		gantry_error_free(&err);
		return;
	}
	json_array_foreach(json_object_get(j, "destinations"), i, v) {
		char dest[128], tx[16], rx[16];
		const char *reason = str(v, "policy") ? str(v, "policy") : str(v, "reason");

		snprintf(dest, sizeof(dest), "%s:%lld%s", str(v, "addr") ? str(v, "addr") : "?",
			 (long long)json_integer_value(json_object_get(v, "port")),
			 json_is_true(json_object_get(v, "inbound")) ? " (in)" : "");
		size_str((unsigned long long)json_integer_value(json_object_get(v, "tx_bytes")), tx,
			 sizeof(tx));
		size_str((unsigned long long)json_integer_value(json_object_get(v, "rx_bytes")), rx,
			 sizeof(rx));
		row_key(row_add(&d->pages[TUI_TRAFFIC], sb->name, 7,
				strcmp(str(v, "verdict") ? str(v, "verdict") : "", "allowed") == 0
					? "allow"
					: "BLOCK",
				sb->name, str(v, "proto"), tx, rx, dest, reason),
			"%s %s %lld", str(v, "addr") ? str(v, "addr") : "",
			str(v, "proto") ? str(v, "proto") : "", (long long)json_integer_value(json_object_get(v, "port")));
	}
	json_array_foreach(json_object_get(j, "dns"), i, v) {
		char count[24];

		snprintf(count, sizeof(count), "%lldx",
			 (long long)json_integer_value(json_object_get(v, "count")));
		row_key(row_add(&d->pages[TUI_TRAFFIC], sb->name, 7,
				strcmp(str(v, "verdict") ? str(v, "verdict") : "", "allowed") == 0
					? "allow"
					: "BLOCK",
				sb->name, "dns", count, "-", str(v, "name"), str(v, "qtype")),
			"dns %s", str(v, "name") ? str(v, "name") : "");
	}
	json_decref(j);
}

static void rule_rows(struct tui_data *d, const struct sandbox *sb)
{
	json_t *p = sb->net_policy, *v;
	size_t i;

	if (!sb->net)
		return;
	if (p == NULL) {
		row_add(&d->pages[TUI_RULES], sb->name, 5, sb->name, "default", "(the built-in policy)",
			"-", "-");
		return;
	}
	row_add(&d->pages[TUI_RULES], sb->name, 5, sb->name, str(p, "default"), "(anything else)",
		"any", "-");
	json_array_foreach(json_object_get(p, "rules"), i, v)
		row_add(&d->pages[TUI_RULES], sb->name, 5, sb->name, str(v, "action"),
			str(v, "cidr") ? str(v, "cidr") : "any address", str(v, "proto"),
			str(v, "ports"));
	json_array_foreach(json_object_get(p, "allowDomains"), i, v)
		row_add(&d->pages[TUI_RULES], sb->name, 5, sb->name, "allow", json_string_value(v),
			"dns", "-");
}

static void mount_rows(struct tui_data *d, const struct sandbox *sb)
{
	for (size_t i = 0; i < sb->nr_shares; i++) {
		struct share_spec sp;
		gantry_error_t err = NULL;

		if (share_spec_parse(sb->shares[i], NULL, &sp, &err) < 0) {
			gantry_error_free(&err);
			continue;
		}
		row_key(row_add(&d->pages[TUI_MOUNTS], sb->name, 5, sb->name, sp.ro ? "ro" : "rw",
				sp.tag, sp.ctr_path, sp.host_path),
			"%s", sp.tag);
		share_spec_free(&sp);
	}
}

/* A canonical port spec, [BIND:]HOST:GUEST[/udp]. */
static void port_rows(struct tui_data *d, const struct sandbox *sb)
{
	for (size_t i = 0; i < sb->nr_ports; i++) {
		cleanup_free char *s = xstrdup(sb->ports[i]);
		struct tui_row *r;
		char *proto = strchr(s, '/'), *guest;

		if (proto)
			*proto++ = '\0';
		guest = strrchr(s, ':');
		if (guest)
			*guest++ = '\0';
		r = row_add(&d->pages[TUI_PORTS], sb->name, 4, sb->name, s, guest,
			    proto ? proto : "tcp");
		row_key(r, "%s", sb->ports[i]);
	}
}

static void secret_rows(struct tui_data *d, const struct sandbox *sb)
{
	for (size_t i = 0; i < sb->nr_secrets; i++) {
		struct secret_spec sp;
		gantry_error_t err = NULL;
		char hosts[TUI_CELL_MAX] = "";
		size_t len = 0;

		if (secret_spec_parse(sb->secrets[i], &sp, &err) < 0) {
			gantry_error_free(&err);
			continue;
		}
		for (size_t h = 0; h < sp.nr_hosts && len < sizeof(hosts); h++)
			len += (size_t)snprintf(hosts + len, sizeof(hosts) - len, "%s%s", h ? "," : "",
						sp.hosts[h]);
		row_key(row_add(&d->pages[TUI_SECRETS], sb->name, 5, sb->name, sp.name,
				sp.inject	 ? "injected" :
				sp.nr_hosts ? "bound" :
					      secret_source_name(sp.source),
				sb->state == SANDBOX_RUNNING ? "loaded" : "not loaded",
				len ? hosts : "-"),
			"%s", sp.name);
		secret_spec_free(&sp);
	}
}

static void audit_rows(struct tui_data *d, const struct sandbox *sb)
{
	json_t *j = NULL, *v;
	gantry_error_t err = NULL;
	size_t i;

	if (sandbox_audit(sb->name, &j, &err) < 0) {
		gantry_error_free(&err);
		return;
	}
	json_array_foreach(json_object_get(j, "events"), i, v) {
		const char *t = str(v, "time");

		row_add(&d->pages[TUI_AUDIT], sb->name, 6, t && strlen(t) >= 19 ? t + 11 : t,
			sb->name, str(v, "kind"), str(v, "decision"), str(v, "secret"),
			str(v, "host") ? str(v, "host") : str(v, "reason"));
	}
	json_decref(j);
}

static void snapshot_rows(struct tui_data *d)
{
	json_t *j = NULL, *v;
	gantry_error_t err = NULL;
	size_t i;

	if (sandbox_snapshot_list(&j, &err) < 0) {
		gantry_error_free(&err);
		return;
	}
	json_array_foreach(j, i, v) {
		char age[24];

		age_str(str(v, "created"), d->now, age, sizeof(age));
		row_add(&d->pages[TUI_SNAPSHOTS], NULL, 4, str(v, "name"), str(v, "source"), age,
			str(v, "error") ? str(v, "error") : str(v, "image"));
	}
	json_decref(j);
}

void tui_data_load(struct tui_data *d, time_t now, struct tui_cpu *cpu)
{
	struct sandbox *v = NULL;
	gantry_error_t err = NULL;
	size_t n = 0;

	memset(d, 0, sizeof(*d));
	d->now = now;
	d->loaded = true;
	if (sandbox_list(&v, &n, &err) < 0) {
		d->error = tui_cell(gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		sandbox_row(d, &v[i], cpu);
		if (v[i].state == SANDBOX_BROKEN)
			continue;
		traffic_rows(d, &v[i]);
		rule_rows(d, &v[i]);
		mount_rows(d, &v[i]);
		port_rows(d, &v[i]);
		secret_rows(d, &v[i]);
		audit_rows(d, &v[i]);
	}
	snapshot_rows(d);
	sandbox_list_free(v, n);
}

static void log_line(void *opaque, const char *text, size_t len)
{
	struct tui_data *d = opaque;

	(void)len;
	if (d->nlog == TUI_LOG_LINES) {
		free(d->log[0]);
		memmove(d->log, d->log + 1, (TUI_LOG_LINES - 1) * sizeof(*d->log));
		d->nlog--;
	}
	d->log[d->nlog++] = tui_cell(text);
}

void tui_data_load_log(struct tui_data *d, const char *name, int which)
{
	struct sandbox_logs_opts o = { .which = (enum sandbox_log)which, .tail = TUI_LOG_LINES };
	gantry_error_t err = NULL;

	d->log = xzalloc(TUI_LOG_LINES * sizeof(*d->log));
	if (sandbox_logs(name, &o, log_line, d, NULL, &err) < 0) {
		cleanup_free char *why = tui_cell(gantry_error_str(err));

		log_line(d, why, strlen(why));
		gantry_error_free(&err);
	}
}

void tui_data_free(struct tui_data *d)
{
	for (int p = 0; p < TUI_PAGES; p++) {
		struct tui_table *t = &d->pages[p];

		for (size_t i = 0; i < t->n; i++) {
			for (int c = 0; c < TUI_MAX_COLS; c++)
				free(t->rows[i].cells[c]);
			free(t->rows[i].sandbox);
			free(t->rows[i].key);
		}
		free(t->rows);
	}
	for (size_t i = 0; i < d->nlog; i++)
		free(d->log[i]);
	free(d->log);
	free(d->error);
	memset(d, 0, sizeof(*d));
}
