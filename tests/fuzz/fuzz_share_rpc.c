/* libFuzzer target for what the share worker takes from others: the
 * VMM worker's request messages (share_rpc_parse), whose iovecs must all
 * lie inside guest RAM, served by a server with only its hub; the
 * metadata kept beside a host file (fs_meta_parse), which must format
 * back to a value that parses to the same; and a snapshot's tables
 * (fs_server_load, from a state file), taken by a new server of two
 * exports of a small tree, which may open nothing outside it.
 *
 * Input: a mode byte; bit 0 set: an xattr value; else bit 1 set: a table;
 * else 2 bytes of RAM size (1..65536), 2 of the message's length, the
 * message, then RAM's first bytes (a pattern after them). */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "share/internal.h"
#include "share/rpc.h"

#include "check.h"

static struct fs_server *hub_only(void)
{
	static struct fs_server *s;
	gantry_error_t err = NULL;

	if (!s)
		check(fs_server_new(&s, 64, 0, &err) == 0);
	return s;
}

static void fuzz_rpc(const uint8_t *data, size_t size)
{
	struct iovec in[SHARE_RPC_SEGS_MAX], out[SHARE_RPC_SEGS_MAX];
	size_t nr_in, nr_out, ram_size;
	uint8_t *ram, sum = 0;
	uint32_t op;

	size_t msg_len;

	if (size < 4)
		return;
	ram_size = 1 + (size_t)(data[0] | data[1] << 8);
	msg_len = (size_t)(data[2] | data[3] << 8);
	data += 4, size -= 4;
	if (msg_len > size)
		msg_len = size;
	ram = malloc(ram_size);
	memset(ram, 0x5a, ram_size);
	memcpy(ram, data + msg_len, MIN(size - msg_len, ram_size));
	if (share_rpc_parse(data, msg_len, ram, ram_size, &op, in, &nr_in, out, &nr_out) == 0) {
		check(op == SHARE_RPC_REQ || op == SHARE_RPC_RESET ||
		      (op == SHARE_RPC_SAVE && nr_in == 0 && nr_out == 1) ||
		      (op == SHARE_RPC_LOAD && nr_in == 1 && nr_out == 0));
		check(nr_in <= SHARE_RPC_SEGS_MAX && nr_out <= SHARE_RPC_SEGS_MAX);
		for (size_t i = 0; i < nr_in + nr_out; i++) {
			const struct iovec *v = i < nr_in ? &in[i] : &out[i - nr_in];
			uint8_t *b = v->iov_base;

			check(b >= ram && v->iov_len <= ram_size &&
			      b + v->iov_len <= ram + ram_size);
			for (size_t k = 0; k < v->iov_len; k++)
				sum ^= b[k]; /* ASan: every byte is guest RAM */
		}
		if (op == SHARE_RPC_REQ)
			fs_server_handle(hub_only(), in, nr_in, out, nr_out);
	}
	(void)sum;
	free(ram);
}

static void fuzz_meta(const uint8_t *data, size_t size)
{
	struct fs_meta m, back;
	char buf[FS_META_BUF];
	size_t n;

	if (fs_meta_parse((const char *)data, size, &m) < 0)
		return;
	check(m.set && m.mode <= 07777);
	check(m.dev_type == 0 || m.dev_type == S_IFCHR || m.dev_type == S_IFBLK);
	n = fs_meta_format(&m, buf);
	check(n < FS_META_BUF);
	check(fs_meta_parse(buf, n, &back) == 0);
	check(back.uid == m.uid && back.gid == m.gid && back.mode == m.mode &&
	      back.dev_type == m.dev_type && back.rdev == m.rdev);
}

static char tree_dir[256];

static void tree_rm(void)
{
	static const char *const names[] = { "share/d/x", "share/d", "share/f", "share/link",
					     "share", "" };
	char p[300];

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", tree_dir, names[i]);
		if (unlink(p) < 0)
			rmdir(p);
	}
}

/* TMPDIR/gantry-fuzz-carry-XXXXXX/share: f, d/x and link (to f), made
 * once and removed at exit; the directory's fd. */
static int tree(void)
{
	static int fd = -1;
	const char *tmp = getenv("TMPDIR");
	char *dir = tree_dir, p[300];

	if (fd >= 0)
		return fd;
	snprintf(tree_dir, sizeof(tree_dir), "%s/gantry-fuzz-carry-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	check(mkdtemp(tree_dir) != NULL);
	atexit(tree_rm);
	snprintf(p, sizeof(p), "%s/share", dir);
	check(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/share/d", dir);
	check(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/share/f", dir);
	close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	snprintf(p, sizeof(p), "%s/share/d/x", dir);
	close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	snprintf(p, sizeof(p), "%s/share/link", dir);
	check(symlink("f", p) == 0);
	snprintf(p, sizeof(p), "%s/share", dir);
	fd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	check(fd >= 0);
	return fd;
}

static void fuzz_carry(const uint8_t *data, size_t size)
{
	struct fs_export_opts rw = { 0 }, ro = { .ro = true };
	gantry_error_t err = NULL;
	struct fs_server *s;
	struct fs_stats st;
	long taken;

	check(fs_server_new(&s, 64, 0, &err) == 0);
	check(fs_server_add_export(s, "rw", tree(), &rw, &err) == 0);
	check(fs_server_add_export(s, "ro", tree(), &ro, &err) == 0);
	taken = fs_server_load(s, data, size);
	check(taken >= -1);
	/* The guest names ids: the kept ones are walked to. */
	pthread_mutex_lock(&s->lock);
	for (uint64_t id = 2; id < 40; id++)
		(void)fs_node_get(s, id);
	pthread_mutex_unlock(&s->lock);
	fs_server_stats(s, &st);
	/* Two roots, and the tree's four inodes in each export at most. */
	check(st.nodes <= 2 + 8 && st.handles <= FS_MAX_HANDLES);
	/* What it holds saves to a table a new server takes. */
	{
		static uint8_t again[64 * 1024];
		size_t n = fs_server_save(s, again, sizeof(again));
		struct fs_server *t;

		check(fs_server_new(&t, 64, 0, &err) == 0);
		check(fs_server_add_export(t, "rw", tree(), &rw, &err) == 0);
		check(fs_server_add_export(t, "ro", tree(), &ro, &err) == 0);
		check(fs_server_load(t, again, n) >= 0);
		fs_server_free(t);
	}
	fs_server_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_meta(data + 1, size - 1);
	else if (data[0] & 2)
		fuzz_carry(data + 1, size - 1);
	else
		fuzz_rpc(data + 1, size - 1);
	return 0;
}
