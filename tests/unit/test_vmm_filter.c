/* Unit tests for confine/vmm_filter.h and seccomp_vmm.c: the KVM request
 * lists against the source (every ioctl(..., KVM_...) in src/vmm,
 * src/machine and src/virtio is in exactly one list, the set-up one or a thread's, and no
 * list names a request the source no longer issues), and each thread
 * kind's real filter, loaded in a child, allowing its own requests,
 * refusing the others with EPERM and killing on the killed ones. */
#include <dirent.h>
#include <errno.h>
#include <linux/kvm.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/files.h"
#include "common/util.h"
#include "confine/vmm_filter.h"

#ifndef SOURCE_ROOT
#error "SOURCE_ROOT: the source tree the test scans"
#endif

enum list { L_SETUP, L_VCPU, L_IO, L_FS, L_MAIN, L_COUNT };

static const char *const list_names[L_COUNT] = { "set-up", "vcpu", "io", "fs", "main" };

struct req {
	const char *name;
	unsigned long nr;
	enum list list;
};

#define SETUP_R(r)  { #r, r, L_SETUP },
#define VCPU_R(r)   { #r, r, L_VCPU },
#define IO_R(r)	    { #r, r, L_IO },
#define FS_R(r)	    { #r, r, L_FS },
#define MAIN_R(r)   { #r, r, L_MAIN },
static const struct req reqs[] = { VMM_KVM_SETUP(SETUP_R) VMM_KVM_VCPU(VCPU_R) VMM_KVM_IO(IO_R)
					   VMM_KVM_FS(FS_R) VMM_KVM_MAIN(MAIN_R) };

#define KILLED_R(r) #r,
static const char *const killed[] = { VMM_KVM_KILLED(KILLED_R) };

/* The thread kind that loads a list: one each. */
static bool list_loaded_by(enum list l, enum vmm_thread t)
{
	switch (l) {
	case L_VCPU:
		return t == VMM_THREAD_VCPU;
	case L_IO:
		return t == VMM_THREAD_IO;
	case L_FS:
		return t == VMM_THREAD_FS;
	case L_MAIN:
		return t == VMM_THREAD_MAIN;
	default:
		return false;
	}
}

static void test_lists_are_disjoint(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(reqs); i++)
		for (size_t j = i + 1; j < ARRAY_SIZE(reqs); j++) {
			if (strcmp(reqs[i].name, reqs[j].name) == 0 || reqs[i].nr == reqs[j].nr)
				fail_msg("%s is in the %s and the %s list", reqs[i].name,
					 list_names[reqs[i].list], list_names[reqs[j].list]);
		}
	/* What kills after set-up is a set-up request, of no thread's. */
	for (size_t k = 0; k < ARRAY_SIZE(killed); k++) {
		bool found = false;

		for (size_t i = 0; i < ARRAY_SIZE(reqs); i++)
			if (strcmp(reqs[i].name, killed[k]) == 0)
				found = reqs[i].list == L_SETUP;
		if (!found)
			fail_msg("killed %s is not a set-up request", killed[k]);
	}
}

/* The source without comments and string literals, so only code is read. */
static void strip(char *s)
{
	char *w = s;

	while (*s) {
		if (s[0] == '/' && s[1] == '*') {
			char *e = strstr(s + 2, "*/");

			s = e ? e + 2 : s + strlen(s);
			*w++ = ' ';
		} else if (s[0] == '/' && s[1] == '/') {
			s += strcspn(s, "\n");
		} else if (*s == '"' || *s == '\'') {
			char q = *s++;

			while (*s && *s != q)
				s += (*s == '\\' && s[1]) ? 2 : 1;
			if (*s)
				s++;
			*w++ = '0';
		} else {
			*w++ = *s++;
		}
	}
	*w = '\0';
}

struct found {
	char name[64];
	char where[300];
	bool seen;
};

struct scan {
	struct found v[128];
	size_t n;
};

static bool ident(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* ioctl's second argument, from just past "ioctl(": the text between
 * the first and second top-level commas, trimmed. */
static bool second_arg(const char *p, char *out, size_t len)
{
	int depth = 0, arg = 0;
	const char *start = NULL;

	for (; *p; p++) {
		if (*p == '(') {
			depth++;
		} else if (*p == ')' && depth-- == 0) {
			break;
		} else if (*p == ',' && depth == 0) {
			if (++arg == 1) {
				start = p + 1;
				continue;
			}
			break;
		}
	}
	if (start == NULL)
		return false;
	while (*start == ' ' || *start == '\t' || *start == '\n')
		start++;
	size_t n = 0;

	while (ident(start[n]))
		n++;
	if (n == 0 || n >= len)
		return false;
	memcpy(out, start, n);
	out[n] = '\0';
	return true;
}

static void scan_file(struct scan *sc, const char *path, const char *rel)
{
	gantry_error_t err = NULL;
	char *text = NULL;
	size_t len;
	unsigned int line = 1;

	if (read_file_max(path, 1 << 20, &text, &len, &err) < 0 || text == NULL)
		fail_msg("%s: cannot read it", rel);
	strip(text);
	for (char *p = text; *p; p++) {
		if (*p == '\n')
			line++;
		if (strncmp(p, "ioctl(", 6) != 0 || (p > text && ident(p[-1])))
			continue;
		struct found *f;

		assert_true(sc->n < ARRAY_SIZE(sc->v));
		f = &sc->v[sc->n];
		if (!second_arg(p + 6, f->name, sizeof(f->name)))
			fail_msg("%s:%u: an ioctl whose request the test cannot read", rel, line);
		snprintf(f->where, sizeof(f->where), "%s:%u", rel, line);
		sc->n++;
	}
	free(text);
}

static void scan_dir(struct scan *sc, const char *sub)
{
	char dir[512];
	DIR *d;
	struct dirent *e;

	snprintf(dir, sizeof(dir), "%s/%s", SOURCE_ROOT, sub);
	d = opendir(dir);
	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		char path[1024], rel[256];

		if (n < 3 || strcmp(e->d_name + n - 2, ".c") != 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		snprintf(rel, sizeof(rel), "%s/%s", sub, e->d_name);
		scan_file(sc, path, rel);
	}
	closedir(d);
}

static void test_source_requests_are_listed(void **state)
{
	struct scan *sc = xzalloc(sizeof(*sc));
	bool listed_seen[ARRAY_SIZE(reqs)] = { false };

	(void)state;
	scan_dir(sc, "src/vmm");
	scan_dir(sc, "src/machine");
	scan_dir(sc, "src/virtio");
	assert_true(sc->n >= ARRAY_SIZE(reqs)); /* the scan found the calls at all */
	for (size_t i = 0; i < sc->n; i++) {
		const struct found *f = &sc->v[i];
		size_t hits = 0;

		/* The filters allow no other ioctl after set-up: a new one,
		 * KVM's or not, goes into a list of vmm_filter.h. */
		for (size_t j = 0; j < ARRAY_SIZE(reqs); j++)
			if (strcmp(reqs[j].name, f->name) == 0) {
				hits++;
				listed_seen[j] = true;
			}
		if (hits != 1)
			fail_msg("%s: ioctl %s is in %zu lists of confine/vmm_filter.h, not one",
				 f->where, f->name, hits);
	}
	for (size_t j = 0; j < ARRAY_SIZE(reqs); j++)
		if (!listed_seen[j])
			fail_msg("%s (%s list) is issued nowhere in src/vmm, src/machine or src/virtio",
				 reqs[j].name, list_names[reqs[j].list]);
	free(sc);
}

/* In a child: load the base and kind t's filter, issue request nr on a
 * bad fd. Returns the errno seen, or -SIGNAL when the child was killed. */
static int try_ioctl(enum vmm_thread t, unsigned long nr)
{
	static const struct vmm_filter_opts o = { .fs = true };
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0) {
		if (confine_filter_vmm(VMM_THREAD_BASE, &o, NULL) < 0 ||
		    (t != VMM_THREAD_BASE && confine_filter_vmm(t, &o, NULL) < 0))
			_exit(100);
		if (ioctl(-1, nr, 0) < 0)
			_exit(errno == EBADF ? 0 : errno == EPERM ? 1 : 101);
		_exit(102);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return -WTERMSIG(status);
	assert_true(WIFEXITED(status));
	assert_true(WEXITSTATUS(status) < 100);
	return WEXITSTATUS(status) == 0 ? EBADF : EPERM;
}

static bool is_killed(const char *name)
{
	for (size_t k = 0; k < ARRAY_SIZE(killed); k++)
		if (strcmp(killed[k], name) == 0)
			return true;
	return false;
}

static void test_filters_follow_the_lists(void **state)
{
	(void)state;
	for (int t = VMM_THREAD_VCPU; t < VMM_THREAD_KINDS; t++)
		for (size_t j = 0; j < ARRAY_SIZE(reqs); j++) {
			int want = is_killed(reqs[j].name)	     ? -SIGSYS
				   : list_loaded_by(reqs[j].list, t) ? EBADF
								     : EPERM;
			int got = try_ioctl(t, reqs[j].nr);

			if (got != want)
				fail_msg("%s thread, %s: %d, want %d", vmm_thread_name(t),
					 reqs[j].name, got, want);
		}
	/* A request in no list at all: refused, not killed. */
	assert_int_equal(try_ioctl(VMM_THREAD_BASE, FIONREAD), EPERM);
	assert_int_equal(try_ioctl(VMM_THREAD_BASE, KVM_RUN), EBADF);
	assert_int_equal(try_ioctl(VMM_THREAD_BASE, KVM_CHECK_EXTENSION), EPERM);
}

/* In a child, under the base and vCPU filters (with log or not): what
 * getppid (in no list) and clone3 (ENOSYS in every filter) return. */
static void refusals(bool log, int *getppid_errno, int *clone3_errno)
{
	struct vmm_filter_opts o = { .log = log };
	int pipefd[2], got[2] = { -1, -1 };
	pid_t pid;

	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int r[2];

		if (confine_filter_vmm(VMM_THREAD_BASE, &o, NULL) < 0 ||
		    confine_filter_vmm(VMM_THREAD_VCPU, &o, NULL) < 0)
			_exit(100);
		r[0] = syscall(SYS_getppid) < 0 ? errno : 0;
		r[1] = syscall(SYS_clone3, NULL, 0) < 0 ? errno : 0;
		_exit(write(pipefd[1], r, sizeof(r)) == sizeof(r) ? 0 : 101);
	}
	close(pipefd[1]);
	assert_int_equal(read(pipefd[0], got, sizeof(got)), sizeof(got));
	close(pipefd[0]);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	*getppid_errno = got[0];
	*clone3_errno = got[1];
}

/* The filters are BPF made when gantry was built; with log, what they
 * refuse is allowed (and logged by the kernel) instead, but clone3's
 * ENOSYS, which is not a refusal, stays. */
static void test_log_allows_what_is_refused(void **state)
{
	int p, c;

	(void)state;
	refusals(false, &p, &c);
	assert_int_equal(p, EPERM);
	assert_int_equal(c, ENOSYS);
	refusals(true, &p, &c);
	assert_int_equal(p, 0);
	assert_int_equal(c, ENOSYS);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lists_are_disjoint),
		cmocka_unit_test(test_source_requests_are_listed),
		cmocka_unit_test(test_filters_follow_the_lists),
		cmocka_unit_test(test_log_allows_what_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
