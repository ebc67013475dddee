/* Throughput check for the EROFS writer (not a test):
 *   erofs_bench gen LAYER.tar MIB [SEED]   write a layer of mixed-size files
 *   erofs_bench convert IMAGE LAYER...     apply layers, write, publish
 * convert prints the content bytes, the seconds and MB/s. Compare with
 *   tar -xf LAYER.tar -C DIR && time mkfs.erofs -Enoinline_data IMAGE DIR
 * (or without -E for mkfs's tail packing, which ours also does). */
#include <archive.h>
#include <archive_entry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "image/erofs.h"
#include "image/layer.h"

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* Sizes shaped like a distro image: many small files, a few big ones. */
static size_t pick_size(void)
{
	uint64_t r = rng() % 1000;

	if (r < 700)
		return rng() % 4096;
	if (r < 950)
		return 4096 + rng() % (32 * 1024);
	if (r < 995)
		return 36 * 1024 + rng() % (220 * 1024);
	return 1024 * 1024 + rng() % (7 * 1024 * 1024);
}

static int gen(const char *path, uint64_t bytes)
{
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	uint8_t *buf = xmalloc(9 * 1024 * 1024);
	uint64_t done = 0;
	unsigned int n = 0;

	archive_write_set_format_pax_restricted(a);
	if (archive_write_open_filename(a, path) != ARCHIVE_OK) {
		fprintf(stderr, "gen: %s\n", archive_error_string(a));
		return 1;
	}
	while (done < bytes) {
		char name[64];
		size_t size = pick_size();

		if (n % 100 == 0) {
			snprintf(name, sizeof(name), "d%04u/", n / 100);
			archive_entry_clear(e);
			archive_entry_set_pathname(e, name);
			archive_entry_set_filetype(e, AE_IFDIR);
			archive_entry_set_perm(e, 0755);
			archive_write_header(a, e);
		}
		snprintf(name, sizeof(name), "d%04u/f%06u", n / 100, n);
		/* text-like: words from a small vocabulary, about 3:1 under gzip */
		for (size_t i = 0; i < size; i += 8) {
			uint64_t v = 0x2020202020202020ull | (rng() % 512) * 0x0101010101ull;

			memcpy(buf + i, &v, MIN(8, size - i));
		}
		archive_entry_clear(e);
		archive_entry_set_pathname(e, name);
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, (la_int64_t)size);
		archive_entry_set_mtime(e, 1700000000, 0);
		if (archive_write_header(a, e) != ARCHIVE_OK ||
		    archive_write_data(a, buf, size) != (la_ssize_t)size) {
			fprintf(stderr, "gen: %s\n", archive_error_string(a));
			return 1;
		}
		done += size;
		n++;
	}
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	free(buf);
	printf("%u files, %llu bytes of content\n", n, (unsigned long long)done);
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int convert(const char *image, char **layers, int n)
{
	gantry_error_t err = NULL;
	struct erofs_tree *t = NULL;
	char *tmp = NULL;
	double t0 = now(), t1;
	int fd = erofs_open_temp(image, &tmp, &err);
	struct stat st;

	if (fd < 0 || erofs_tree_new(fd, &t, &err) < 0)
		goto fail;
	for (int i = 0; i < n; i++)
		if (layer_apply_file(t, layers[i], &err) < 0)
			goto fail;
	if (erofs_write(t, &err) < 0)
		goto fail;
	t1 = now();
	if (erofs_publish(fd, tmp, image, &err) < 0)
		goto fail;
	erofs_tree_free(t);
	close(fd);
	free(tmp);
	stat(image, &st);
	printf("%s: %.1f MiB image, %.2f s to apply and write, %.2f s with fsync+rename\n", image,
	       (double)st.st_size / (1 << 20), t1 - t0, now() - t0);
	return 0;
fail:
	erofs_tree_free(t);
	if (tmp)
		unlink(tmp);
	free(tmp);
	gantry_error_print(&err);
	return 1;
}

int main(int argc, char **argv)
{
	uint64_t mib;

	if (argc >= 4 && strcmp(argv[1], "gen") == 0 && parse_u64(argv[3], 1 << 20, &mib) == 0) {
		if (argc > 4)
			rng_state ^= strtoull(argv[4], NULL, 10) * 0x9e3779b97f4a7c15ull;
		return gen(argv[2], mib << 20);
	}
	if (argc >= 4 && strcmp(argv[1], "convert") == 0)
		return convert(argv[2], argv + 3, argc - 3);
	fprintf(stderr, "usage: erofs_bench gen LAYER MIB [SEED] | convert IMAGE LAYER...\n");
	return 2;
}
