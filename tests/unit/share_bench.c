/* The share server's own cost per request, no VM (not a test):
 *   share_bench [DIR]    (default /dev/shm)
 * calls fs_server_handle as the virtio-fs device does, the request laid
 * out as Linux lays it out (header and arguments, then each data page a
 * descriptor of its own), in a fresh directory under DIR, and prints the
 * microseconds per request: CREATE with its RELEASE, LOOKUP of a name
 * that is there and of one that is not, WRITE of 4 KiB and of 1 MiB, READ
 * of 128 KiB (the guest's readahead window); and a snapshot's tables
 * (share/carry.c): the save per node, the load, and a node's first
 * GETATTR on the restored server (its walk), against a later one. What a
 * request costs in a VM on top of this is the transport's: bench/share. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/files.h"
#include "share/server.h"

#define PAGE	  4096
#define NR_FILES  800 /* each a node, so an fd: below the usual RLIMIT_NOFILE */
#define NR_SMALL  20000
#define BIG_MIB	  256
#define READ_SIZE (128 * 1024)
#define HDR	  sizeof(struct fuse_in_header)
#define OUT_HDR	  sizeof(struct fuse_out_header)
#define MAX_IOV	  (FS_MAX_PAGES + 2) /* descriptors per side */

static struct fs_server *srv;
static uint8_t in_buf[FS_MAX_REQUEST + PAGE], out_buf[FS_MAX_REQUEST + PAGE];
static uint64_t next_unique = 1;

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* One request: its header and arguments in one descriptor, then data
 * bytes of WRITE data a page a descriptor; room bytes of reply after the
 * out header, pages apart when more than a page. Returns the reply's
 * error (0 or a negative errno); the payload is at out_buf + OUT_HDR. */
static int call(uint32_t op, uint64_t node, const void *arg, size_t arg_len, size_t data,
		size_t room)
{
	struct fuse_in_header *h = (struct fuse_in_header *)in_buf;
	static struct iovec in[MAX_IOV], out[MAX_IOV];
	size_t ni = 0, no = 0;

	*h = (struct fuse_in_header){ .len = (uint32_t)(HDR + arg_len + data),
				      .opcode = op,
				      .unique = next_unique++,
				      .nodeid = node };
	memcpy(in_buf + HDR, arg, arg_len);
	in[ni++] = (struct iovec){ in_buf, HDR + arg_len };
	for (size_t off = 0; off < data; off += PAGE)
		in[ni++] = (struct iovec){ in_buf + PAGE + off, PAGE };
	if (room <= PAGE) {
		out[no++] = (struct iovec){ out_buf, OUT_HDR + room };
	} else {
		out[no++] = (struct iovec){ out_buf, OUT_HDR };
		for (size_t off = 0; off < room; off += PAGE)
			out[no++] = (struct iovec){ out_buf + PAGE + off, PAGE };
	}
	if (fs_server_handle(srv, in, ni, out, no) < OUT_HDR)
		return 1;
	return ((struct fuse_out_header *)out_buf)->error;
}

static void must(int err, const char *what)
{
	if (err != 0) {
		fprintf(stderr, "share_bench: %s: %s\n", what, err > 0 ? "no reply" : strerror(-err));
		exit(1);
	}
}

static const struct fuse_entry_out *entry(void)
{
	return (const struct fuse_entry_out *)(out_buf + OUT_HDR);
}

static void report(const char *what, double t0, unsigned int n)
{
	printf("%-16s %8.2f us\n", what, (now() - t0) / n * 1e6);
}

/* Create name in dir, open; its node and handle. */
static void create(uint64_t dir, const char *name, uint32_t flags, uint64_t *node, uint64_t *fh)
{
	struct {
		struct fuse_create_in c;
		char name[32];
	} a = { .c = { .flags = flags | O_CREAT | O_EXCL, .mode = S_IFREG | 0644 } };
	size_t len = (size_t)snprintf(a.name, sizeof(a.name), "%s", name) + 1;

	must(call(FUSE_CREATE, dir, &a, sizeof(a.c) + len, 0,
		  sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)),
	     "CREATE");
	*node = entry()->nodeid;
	*fh = ((const struct fuse_open_out *)(entry() + 1))->fh;
}

static uint64_t files[NR_FILES];

static void bench_names(uint64_t root)
{
	char name[32];
	uint64_t node, fh;
	double t0 = now();

	for (unsigned int i = 0; i < NR_FILES; i++) {
		struct fuse_release_in rel = { 0 };

		snprintf(name, sizeof(name), "f%06u", i);
		create(root, name, O_WRONLY, &node, &fh);
		files[i] = node;
		rel.fh = fh;
		must(call(FUSE_RELEASE, node, &rel, sizeof(rel), 0, 0), "RELEASE");
	}
	report("CREATE+RELEASE", t0, NR_FILES);
	t0 = now();
	for (unsigned int i = 0; i < NR_SMALL; i++) {
		int n = snprintf(name, sizeof(name), "f%06u", i % NR_FILES);

		must(call(FUSE_LOOKUP, root, name, (size_t)n + 1, 0, sizeof(struct fuse_entry_out)),
		     "LOOKUP");
	}
	report("LOOKUP, there", t0, NR_SMALL);
	t0 = now();
	for (unsigned int i = 0; i < NR_SMALL; i++) {
		int n = snprintf(name, sizeof(name), "x%06u", i);

		/* a negative entry: node 0 */
		if (call(FUSE_LOOKUP, root, name, (size_t)n + 1, 0, sizeof(struct fuse_entry_out)) !=
			    0 ||
		    ((struct fuse_entry_out *)(out_buf + OUT_HDR))->nodeid != 0)
			must(-EIO, "LOOKUP of a missing name");
	}
	report("LOOKUP, missing", t0, NR_SMALL);
}

/* The tables of the NR_FILES nodes bench_names left, into a new server
 * of the same export (dir). */
static void bench_carry(int dir)
{
	static uint8_t table[FS_CARRY_MAX];
	struct fs_export_opts opts = { 0 };
	struct fuse_getattr_in ga = { 0 };
	gantry_error_t err = NULL;
	size_t len;
	double t0 = now();

	len = fs_server_save(srv, table, sizeof(table));
	report("save, a node", t0, NR_FILES);
	fs_server_free(srv);
	if (fs_server_new(&srv, 1 << 16, 0, &err) < 0 ||
	    fs_server_add_export(srv, "b", dir, &opts, &err) < 0) {
		fprintf(stderr, "share_bench: %s\n", gantry_error_str(err));
		exit(1);
	}
	fs_server_assume_init(srv, FUSE_KERNEL_MINOR_VERSION);
	t0 = now();
	if (fs_server_load(srv, table, len) != NR_FILES)
		must(-EIO, "load the tables");
	report("load, a node", t0, NR_FILES);
	for (int round = 0; round < 2; round++) {
		t0 = now();
		for (unsigned int i = 0; i < NR_FILES; i++)
			must(call(FUSE_GETATTR, files[i], &ga, sizeof(ga), 0,
				  sizeof(struct fuse_attr_out)),
			     "GETATTR");
		report(round ? "GETATTR, later" : "GETATTR, first", t0, NR_FILES);
	}
}

static void bench_data(uint64_t root)
{
	uint64_t node, fh;
	double t0;

	create(root, "big", O_RDWR, &node, &fh);
	t0 = now();
	for (unsigned int i = 0; i < NR_SMALL; i++) {
		struct fuse_write_in w = { .fh = fh, .offset = (uint64_t)i * PAGE, .size = PAGE };

		must(call(FUSE_WRITE, node, &w, sizeof(w), PAGE, sizeof(struct fuse_write_out)),
		     "WRITE");
	}
	report("WRITE 4 KiB", t0, NR_SMALL);
	t0 = now();
	for (unsigned int i = 0; i < BIG_MIB; i++) {
		struct fuse_write_in w = { .fh = fh, .offset = (uint64_t)i << 20, .size = FS_MAX_WRITE };

		must(call(FUSE_WRITE, node, &w, sizeof(w), FS_MAX_WRITE,
			  sizeof(struct fuse_write_out)),
		     "WRITE");
	}
	report("WRITE 1 MiB", t0, BIG_MIB);
	t0 = now();
	for (unsigned int i = 0; i < BIG_MIB * (1024 * 1024 / READ_SIZE); i++) {
		struct fuse_read_in r = { .fh = fh, .offset = (uint64_t)i * READ_SIZE, .size = READ_SIZE };

		must(call(FUSE_READ, node, &r, sizeof(r), 0, READ_SIZE), "READ");
	}
	report("READ 128 KiB", t0, BIG_MIB * (1024 * 1024 / READ_SIZE));
}

int main(int argc, char **argv)
{
	struct fuse_init_in init = { .major = FUSE_KERNEL_VERSION,
				     .minor = FUSE_KERNEL_MINOR_VERSION,
				     .max_readahead = READ_SIZE,
				     .flags = FUSE_MAX_PAGES };
	struct fs_export_opts opts = { 0 };
	gantry_error_t err = NULL;
	uint64_t root;
	char dir[256];
	int fd;

	snprintf(dir, sizeof(dir), "%s/share_bench.XXXXXX", argc > 1 ? argv[1] : "/dev/shm");
	if (!mkdtemp(dir)) {
		perror("share_bench: mkdtemp");
		return 1;
	}
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fs_server_new(&srv, 1 << 16, 0, &err) < 0 ||
	    fs_server_add_export(srv, "b", fd, &opts, &err) < 0) {
		fprintf(stderr, "share_bench: %s\n", err ? gantry_error_str(err) : strerror(errno));
		return 1;
	}
	must(call(FUSE_INIT, 0, &init, sizeof(init), 0, sizeof(struct fuse_init_out)), "INIT");
	must(call(FUSE_LOOKUP, FUSE_ROOT_ID, "b", 2, 0, sizeof(struct fuse_entry_out)), "LOOKUP");
	root = entry()->nodeid;
	bench_names(root);
	bench_carry(fd);
	bench_data(root);
	fs_server_free(srv);
	close(fd);
	rm_tree(dir);
	return 0;
}
