/* libFuzzer target for the tar to EROFS path: the input is one OCI layer
 * (tar, or tar in gzip or zstd) read by the real layer reader
 * (layer_apply_fd) into our EROFS writer, twice, as two layers (so the
 * second one's whiteouts and replacements act on what the first one wrote),
 * then written out to a memfd and read back by the tests' independent EROFS
 * reader, which must find a well-formed tree. A layer the reader refuses
 * must fail with one line. Seeds are real tars: see mkcorpus.py. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/util.h"
#include "image/erofs.h"
#include "image/layer.h"
#include "../unit/erofs/reader.h"

/* /etc/passwd as flatten_finish reads it. */
#define ETC_MAX (1u << 20)

#include "check.h"

static void one_line(gantry_error_t *err)
{
	check(*err != NULL);
	check(strchr(gantry_error_str(*err), '\n') == NULL);
	gantry_error_free(err);
}

static int input_fd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-layer", MFD_CLOEXEC);

	check(fd >= 0);
	check(write(fd, data, size) == (ssize_t)size);
	check(lseek(fd, 0, SEEK_SET) == 0);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	cleanup_close int out = memfd_create("fuzz-erofs", MFD_CLOEXEC);
	gantry_error_t err = NULL;
	struct erofs_tree *t;
	char *etc = NULL, path[64];
	uint64_t ninodes, nentries;
	size_t len;
	struct rd r;

	check(out >= 0);
	check(erofs_tree_new(out, &t, &err) == 0);
	for (int layer = 0; layer < 2; layer++) {
		cleanup_close int in = input_fd(data, size);

		if (layer_apply_fd(t, in, &err) < 0) {
			one_line(&err);
			erofs_tree_free(t);
			return 0;
		}
	}
	if (erofs_tree_read_file(t, "/etc/passwd", ETC_MAX, &etc, &len, &err) < 0)
		one_line(&err);
	else
		check(etc == NULL || strlen(etc) <= len);
	free(etc);
	if (erofs_write(t, &err) < 0) {
		/* Only limits of the format may stop a tree the layers built. */
		one_line(&err);
		erofs_tree_free(t);
		return 0;
	}
	erofs_tree_free(t);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", out);
	check(rd_open(&r, path) == 0);
	check(rd_check_tree(&r, &ninodes, &nentries) == 0);
	check(ninodes == r.inos);
	rd_close(&r);
	return 0;
}
