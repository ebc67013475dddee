/* libFuzzer target for what `gantry cp` writes on the host from a tar
 * stream a guest made (sandbox_untar): each input is a tar written below
 * a fresh destination, "src" being what was asked for. Whatever the
 * stream, nothing appears beside the destination (a directory kept empty
 * next to it, and one path outside the tree), and a refusal is one line.
 * Seeds are tars: see mkcorpus.py. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "sandbox/copy.h"

#include "check.h"

static char root[64];

static void remove_root(void)
{
	rm_tree(root);
}

static bool empty_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	check(d != NULL);
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sandbox_copy_opts o = { .archive = size % 2 == 1 };
	struct sandbox_copy_result res;
	char dest[128], beside[128], top[160];
	gantry_error_t err = NULL;
	bool refused;
	int fd = memfd_create("fuzz-untar", MFD_CLOEXEC);

	if (root[0] == '\0') {
		snprintf(root, sizeof(root), "/tmp/gantry-fuzz-untar-XXXXXX");
		check(mkdtemp(root) != NULL);
		atexit(remove_root);
	}
	snprintf(dest, sizeof(dest), "%s/tree/dest", root);
	snprintf(beside, sizeof(beside), "%s/tree/beside", root);
	snprintf(top, sizeof(top), "%s/tree", root);
	rm_tree(top);
	check(mkdir(top, 0755) == 0 && mkdir(beside, 0755) == 0);
	check(fd >= 0 && write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0);
	if (sandbox_untar(fd, "src", dest, &o, NULL, &res, &refused, &err) < 0) {
		check(err != NULL && strchr(gantry_error_str(err), '\n') == NULL);
		gantry_error_free(&err);
	}
	close(fd);
	check(empty_dir(beside));
	{
		char list[160];

		/* The tree holds dest (maybe) and beside, nothing else. */
		DIR *d = opendir(top);
		struct dirent *e;

		check(d != NULL);
		while ((e = readdir(d)) != NULL) {
			snprintf(list, sizeof(list), "%s", e->d_name);
			check(strcmp(list, ".") == 0 || strcmp(list, "..") == 0 ||
			      strcmp(list, "dest") == 0 || strcmp(list, "beside") == 0);
		}
		closedir(d);
	}
	check(access("/tmp/gantry-fuzz-untar-escaped", F_OK) != 0);
	return 0;
}
