/* gantry-mkfilters OUT.c: every seccomp filter gantry loads, made with
 * libseccomp from the rules of seccomp.c and seccomp_vmm.c and written out
 * as BPF programs (struct sock_filter arrays) for filters.c to load. Run
 * when gantry is built, on the machine that builds it: a worker's start
 * then loads a ready program instead of compiling its rules (libseccomp
 * is not linked into gantry at all).
 *
 * The network worker's and the share worker's filter, and each VMM
 * thread kind's for every combination of what a VM has (the
 * FILTER_OPT_* bits of filters.h); equal programs are written once. */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "confine/filters.h"
#include "confine/seccomp_rules.h"

#define MAX_PROGS (2 + VMM_THREAD_KINDS * FILTER_OPT_COMBOS)

struct prog {
	unsigned char *bpf;
	size_t len;
};

static struct prog progs[MAX_PROGS];
static size_t nr_progs;

static void fail(const char *what)
{
	fprintf(stderr, "gantry-mkfilters: %s\n", what);
	exit(1);
}

/* f's BPF, as one of progs (an equal one found is reused): its index. */
static size_t add(scmp_filter_ctx f, const char *what)
{
	int fd = memfd_create("bpf", 0);
	struct prog p = { 0 };
	off_t size;

	if (f == NULL)
		fail(what);
	if (fd < 0 || seccomp_export_bpf(f, fd) < 0)
		fail("seccomp_export_bpf");
	seccomp_release(f);
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % 8 != 0)
		fail("an empty or odd BPF program");
	p.len = (size_t)size;
	p.bpf = malloc(p.len);
	if (p.bpf == NULL || pread(fd, p.bpf, p.len, 0) != size)
		fail("reading the BPF back");
	close(fd);
	for (size_t i = 0; i < nr_progs; i++) {
		if (progs[i].len == p.len && memcmp(progs[i].bpf, p.bpf, p.len) == 0) {
			free(p.bpf);
			return i;
		}
	}
	progs[nr_progs] = p;
	return nr_progs++;
}

/* The VM filter_vmm[kind][bits] is for: what filter_opts_index() maps
 * back to bits, or the build fails. */
static struct vmm_filter_opts opts_of(unsigned int bits)
{
	struct vmm_filter_opts o = {
		.console_file = bits & FILTER_OPT_CONSOLE_FILE,
		.fs = bits & FILTER_OPT_FS,
		.fs_remote = bits & FILTER_OPT_FS_REMOTE,
		.profile = bits & FILTER_OPT_PROFILE,
		.dials = bits & FILTER_OPT_DIALS,
		.save = bits & FILTER_OPT_SAVE,
	};

	if (filter_opts_index(&o) != bits)
		fail("FILTER_OPT_* and filter_opts_index() disagree");
	return o;
}

static void write_prog(FILE *out, size_t i)
{
	fprintf(out, "static const struct sock_filter prog%zu[] = {\n", i);
	for (size_t off = 0; off < progs[i].len; off += sizeof(struct sock_filter)) {
		struct sock_filter ins;

		memcpy(&ins, progs[i].bpf + off, sizeof(ins));
		fprintf(out, "\t{ %#x, %u, %u, %#x },\n", ins.code, ins.jt, ins.jf, ins.k);
	}
	fprintf(out, "};\n");
}

int main(int argc, char **argv)
{
	size_t net, share, egress, mcp, vmm[VMM_THREAD_KINDS][FILTER_OPT_COMBOS];
	FILE *out;

	if (argc != 2)
		fail("usage: gantry-mkfilters OUT.c");
	net = add(seccomp_make(seccomp_net_rules), "the network worker's filter");
	share = add(seccomp_make(seccomp_share_rules), "the share worker's filter");
	egress = add(seccomp_make(seccomp_egress_rules), "the egress worker's filter");
	mcp = add(seccomp_make(seccomp_mcp_rules), "the MCP gateway's filter");
	for (unsigned int t = 0; t < VMM_THREAD_KINDS; t++) {
		for (unsigned int bits = 0; bits < FILTER_OPT_COMBOS; bits++) {
			struct vmm_filter_opts o = opts_of(bits);

			vmm[t][bits] = add(seccomp_vmm_make(t, &o), "a VMM thread's filter");
		}
	}
	out = fopen(argv[1], "w");
	if (out == NULL)
		fail(strerror(errno));
	fprintf(out, "/* Written by gantry-mkfilters (src/confine/mkfilters.c) from the rules of\n"
		     " * seccomp.c and seccomp_vmm.c: %zu programs. */\n"
		     "#include \"confine/filters.h\"\n\n",
		nr_progs);
	for (size_t i = 0; i < nr_progs; i++)
		write_prog(out, i);
	fprintf(out, "const struct filter_prog filter_net = { prog%zu, %zu };\n", net,
		progs[net].len / 8);
	fprintf(out, "const struct filter_prog filter_share = { prog%zu, %zu };\n", share,
		progs[share].len / 8);
	fprintf(out, "const struct filter_prog filter_egress = { prog%zu, %zu };\n", egress,
		progs[egress].len / 8);
	fprintf(out, "const struct filter_prog filter_mcp = { prog%zu, %zu };\n", mcp,
		progs[mcp].len / 8);
	fprintf(out, "const struct filter_prog filter_vmm[VMM_THREAD_KINDS][FILTER_OPT_COMBOS] = {\n");
	for (unsigned int t = 0; t < VMM_THREAD_KINDS; t++) {
		fprintf(out, "\t{\n");
		for (unsigned int bits = 0; bits < FILTER_OPT_COMBOS; bits++)
			fprintf(out, "\t\t{ prog%zu, %zu },\n", vmm[t][bits],
				progs[vmm[t][bits]].len / 8);
		fprintf(out, "\t},\n");
	}
	fprintf(out, "};\n");
	if (fclose(out) != 0)
		fail(strerror(errno));
	return 0;
}
