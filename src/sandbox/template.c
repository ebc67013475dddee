/* Template snapshots for one-shot runs (see template.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "common/log.h"
#include "common/util.h"
#include "image/digest.h"
#include "sandbox/machine.h"
#include "sandbox/template.h"

#define TEMPLATE_STATE	"state"
#define TEMPLATE_MEMORY "memory"
#define TEMPLATE_PARAM	"gantry.template=1"
/* A directory being written that old is a run's that died: removed. */
#define TEMPLATE_STALE_S 3600

/* Whether tok is a parameter the kernel's command line keeps in a
 * template's boot: the kernel's own, and gantry-init's debug switch. */
static bool kernel_param(const char *tok, size_t len)
{
	static const char debug[] = "gantry.debug=1";

	return strncmp(tok, "gantry.", 7) != 0 ||
	       (len == sizeof(debug) - 1 && strncmp(tok, debug, len) == 0);
}

/* The kernel's part of append, and the gantry.* rest (either may be
 * NULL), each space-separated. */
static void split(const char *append, char *kernel, size_t kcap, char *rest, size_t rcap)
{
	size_t k = 0, r = 0;

	if (kernel)
		*kernel = '\0';
	if (rest)
		*rest = '\0';
	for (const char *p = append; *p;) {
		size_t len = strcspn(p, " ");
		bool keep = len && kernel_param(p, len);
		char *out = keep ? kernel : rest;
		size_t *at = keep ? &k : &r, cap = keep ? kcap : rcap;

		if (len && out && *at + len + 2 <= cap) {
			if (*at)
				out[(*at)++] = ' ';
			memcpy(out + *at, p, len);
			*at += len;
			out[*at] = '\0';
		}
		p += len;
		p += strspn(p, " ");
	}
}

int template_split_append(struct machine *m, char **config, gantry_error_t *err)
{
	char kernel[sizeof(m->append)];
	char *rest = xmalloc(sizeof(m->append));
	int n;

	split(m->append, kernel, sizeof(kernel), rest, sizeof(m->append));
	n = snprintf(m->append, sizeof(m->append), "%s %s", kernel, TEMPLATE_PARAM);
	if (n < 0 || (size_t)n >= sizeof(m->append)) {
		free(rest);
		return gantry_error(err, 0, "kernel command line too long");
	}
	*config = rest;
	return 0;
}

static void hash_str(struct sha256 *h, const char *s)
{
	sha256_update(h, s ? s : "", strlen(s ? s : "") + 1);
}

/* A file by its path and what says it is the same file. */
static void hash_file(struct sha256 *h, const char *path)
{
	struct stat st = { 0 };
	uint64_t v[5];

	hash_str(h, path);
	if (path && stat(path, &st) < 0)
		memset(&st, 0, sizeof(st));
	v[0] = st.st_dev;
	v[1] = st.st_ino;
	v[2] = (uint64_t)st.st_size;
	v[3] = (uint64_t)st.st_mtim.tv_sec;
	v[4] = (uint64_t)st.st_mtim.tv_nsec;
	sha256_update(h, v, sizeof(v));
}

/* The host's CPU as the kernel names it: a save restores only on its
 * like (the VMM checks CPUID), so another CPU sharing $GANTRY_HOME keeps
 * a template of its own. */
static void hash_cpu(struct sha256 *h)
{
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	int found = 0;

	while (f && found < 2 && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0 || strncmp(line, "flags", 5) == 0) {
			hash_str(h, line);
			found++;
		}
	}
	if (f)
		fclose(f);
}

/* What makes the saved VM, as 64 hex digits. */
static int template_key(const struct machine *m, char key[DIGEST_STR_MAX], gantry_error_t *err)
{
	char kernel[sizeof(m->append)];
	struct sha256 h;
	uint64_t v[6] = { m->cfg.cpus, m->cfg.mem_mib, m->cfg.small_pages, m->net, m->fs_device,
			  m->worker };

	split(m->append, kernel, sizeof(kernel), NULL, 0);
	sha256_init(&h);
	hash_str(&h, "gantry-template-1 " GANTRY_VERSION);
	hash_file(&h, "/proc/self/exe");
	hash_cpu(&h);
	hash_file(&h, m->cfg.kernel);
	hash_file(&h, m->cfg.initrd);
	for (unsigned int i = 0; i < m->cfg.nr_disks; i++) {
		hash_file(&h, m->cfg.disks[i].path);
		sha256_update(&h, &m->cfg.disks[i].ro, sizeof(m->cfg.disks[i].ro));
	}
	sha256_update(&h, v, sizeof(v));
	hash_str(&h, kernel);
	return sha256_final(&h, key, err);
}

struct entry {
	char *name;
	time_t used;
};

static int newer_first(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (y->used > x->used) - (y->used < x->used);
}

/* The least recently used templates past TEMPLATES_MAX, and what a dead
 * run left half written, go. */
static void prune(const char *parent)
{
	DIR *d = opendir(parent);
	struct entry *all = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		cleanup_free char *path = NULL;
		struct stat st;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		xasprintf(&path, "%s/%s", parent, e->d_name);
		if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (e->d_name[0] == '.') {
			if (time(NULL) - st.st_mtime > TEMPLATE_STALE_S)
				rm_tree(path);
			continue;
		}
		if (n == cap)
			all = xrealloc(all, (cap = cap ? 2 * cap : 16) * sizeof(*all));
		all[n++] = (struct entry){ steal_pointer(&path), st.st_mtime };
	}
	closedir(d);
	qsort(all, n, sizeof(*all), newer_first);
	for (size_t i = 0; i < n; i++) {
		if (i >= TEMPLATES_MAX)
			rm_tree(all[i].name);
		free(all[i].name);
	}
	free(all);
}

static int open_in(const char *dir, const char *name, int flags)
{
	cleanup_free char *path = NULL;

	xasprintf(&path, "%s/%s", dir, name);
	return open(path, flags | O_CLOEXEC, 0600);
}

/* dir's two files, opened through one descriptor of it: a template put
 * in place meanwhile is had whole or not at all. 1 with both, 0 with no
 * template there, -1 with half of one (removed). */
static int open_template(const char *dir, int *state, int *mem)
{
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*state = *mem = -1;
	if (d < 0)
		return 0;
	/* Not blocking on a FIFO: what is no regular file fails the
	 * restore's checks. */
	*state = openat(d, TEMPLATE_STATE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	*mem = openat(d, TEMPLATE_MEMORY, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(d);
	if (*state >= 0 && *mem >= 0)
		return 1;
	close_fd(state);
	close_fd(mem);
	/* What a crash or a hand left half: the next save puts a whole one. */
	rm_tree(dir);
	return -1;
}


void template_prepare(struct machine *m, struct sandbox_template *t)
{
	cleanup_free char *home = NULL, *parent = NULL, *tmp = NULL;
	char key[DIGEST_STR_MAX];
	gantry_error_t err = NULL;
	int state, mem;

	*t = TEMPLATE_NONE;
	if (template_key(m, key, &err) < 0 || gantry_home(&home, &err) < 0) {
		log_info("no template: %s", gantry_error_str(err));
		gantry_error_free(&err);
		return;
	}
	xasprintf(&parent, "%s/%s", home, TEMPLATES_SUBDIR);
	if (mkdir(parent, 0700) < 0 && errno != EEXIST) {
		log_info("no template: mkdir `%s`: %s", parent, strerror(errno));
		return;
	}
	xasprintf(&t->dir, "%s/%s", parent, digest_hex(key));
	if (open_template(t->dir, &state, &mem) > 0) {
		/* Used now: the last the pruning takes. */
		utimensat(AT_FDCWD, t->dir, NULL, 0);
		m->cfg.restore_state_fd = t->state_fd = state;
		m->cfg.restore_mem_fd = t->mem_fd = mem;
		t->restore = true;
		m->template = t;
		return;
	}
	xasprintf(&tmp, "%s/.%.16s.XXXXXX", parent, digest_hex(key));
	if (mkdtemp(tmp) == NULL) {
		log_info("no template: mkdtemp in `%s`: %s", parent, strerror(errno));
		free(t->dir);
		t->dir = NULL;
		return;
	}
	t->tmp = steal_pointer(&tmp);
	state = open_in(t->tmp, TEMPLATE_STATE, O_RDWR | O_CREAT | O_EXCL);
	mem = state >= 0 ? open_in(t->tmp, TEMPLATE_MEMORY, O_RDWR | O_CREAT | O_EXCL) : -1;
	if (mem < 0) {
		log_info("no template: its files in `%s`: %s", t->tmp, strerror(errno));
		if (state >= 0)
			close(state);
		template_free(t);
		return;
	}
	m->cfg.save_state_fd = t->state_fd = state;
	m->cfg.save_mem_fd = t->mem_fd = mem;
	m->template = t;
}

void template_commit(struct sandbox_template *t)
{
	cleanup_free char *parent = NULL;
	char *slash;

	if (t->tmp == NULL)
		return;
	if (rename(t->tmp, t->dir) < 0) {
		/* Another run's made it first: the same, so ours goes. */
		if (errno != EEXIST && errno != ENOTEMPTY)
			log_info("template `%s` not kept: %s", t->dir, strerror(errno));
		rm_tree(t->tmp);
	} else {
		log_debug("template saved: %s", t->dir);
	}
	free(t->tmp);
	t->tmp = NULL;
	parent = xstrdup(t->dir);
	slash = strrchr(parent, '/');
	if (slash) {
		*slash = '\0';
		prune(parent);
	}
}

void template_discard(struct sandbox_template *t)
{
	cleanup_free char *state = NULL, *dead = NULL;
	struct stat ours, there;

	if (t->dir == NULL || !t->restore)
		return;
	log_info("template `%s` refused: removed; this run boots cold", t->dir);
	/* Only the one refused: another run may have put a new one there. */
	xasprintf(&state, "%s/%s", t->dir, TEMPLATE_STATE);
	if (fstat(t->state_fd, &ours) < 0 || stat(state, &there) < 0 ||
	    ours.st_dev != there.st_dev || ours.st_ino != there.st_ino)
		return;
	/* Aside first, under a name pruning takes as half written. */
	{
		const char *base = strrchr(t->dir, '/');

		xasprintf(&dead, "%.*s/.%s.dead.%ld", (int)(base - t->dir), t->dir, base + 1,
			  (long)getpid());
	}
	if (rename(t->dir, dead) == 0)
		rm_tree(dead);
}

void template_free(struct sandbox_template *t)
{
	close_fd(&t->state_fd);
	close_fd(&t->mem_fd);
	if (t->tmp)
		rm_tree(t->tmp);
	free(t->tmp);
	free(t->dir);
	*t = TEMPLATE_NONE;
}
