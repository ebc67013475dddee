/* libFuzzer target for what the share worker takes from others: the
 * VMM worker's request messages (share_rpc_parse), whose iovecs must all
 * lie inside guest RAM, served by a server with only its hub; and the
 * metadata kept beside a host file (fs_meta_parse), which must format
 * back to a value that parses to the same.
 *
 * Input: a mode byte; mode even: 2 bytes of RAM size (1..65536), 2 of the
 * message's length, the message, then RAM's first bytes (a pattern after
 * them); odd: an xattr value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
		check(op == SHARE_RPC_REQ || op == SHARE_RPC_RESET);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		fuzz_meta(data + 1, size - 1);
	else
		fuzz_rpc(data + 1, size - 1);
	return 0;
}
