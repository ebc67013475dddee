/* The share server mounted on this host through /dev/fuse, with no VM:
 * the kernel's FUSE client in place of the guest's virtio-fs one (both
 * check permissions themselves, default_permissions), so a POSIX suite
 * or a test can drive the server's semantics directly.
 *
 *   share_fusehost [-uid N -gid N] [-ro] MOUNTPOINT TAG=DIR
 *
 * Mounts the hub at MOUNTPOINT (the export is MOUNTPOINT/TAG), prints
 * "ready" on stdout and serves until the mount goes (umount) or SIGTERM.
 * Root only; it then drops every capability, as the share worker run by
 * root does (FUSEHOST_KEEP_CAPS=1: keeps them). FUSEHOST_STATS=FILE: on
 * SIGUSR1, writes how many requests of each opcode it has served. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "share/server.h"

#define THREADS 4

static struct fs_server *srv;
static int fuse_fd = -1;
static unsigned long served[64];
static const char *stats_path;

static void write_stats(int sig)
{
	FILE *f = fopen(stats_path, "w");

	(void)sig;
	if (!f)
		return;
	for (int op = 0; op < 64; op++)
		if (__atomic_load_n(&served[op], __ATOMIC_RELAXED))
			fprintf(f, "%d %lu\n", op, served[op]);
	fclose(f);
}

static void *serve(void *arg)
{
	size_t cap = FS_MAX_REQUEST + 4096;
	uint8_t *in = malloc(cap), *out = malloc(cap);

	(void)arg;
	for (;;) {
		ssize_t n = read(fuse_fd, in, cap);
		struct iovec iv = { in, 0 }, ov = { out, cap };
		size_t len;

		if (n < 0 && (errno == EINTR || errno == ENOENT || errno == EAGAIN))
			continue;
		if (n <= 0)
			break;
		iv.iov_len = (size_t)n;
		if ((size_t)n >= sizeof(struct fuse_in_header)) {
			uint32_t op = ((struct fuse_in_header *)in)->opcode;

			__atomic_add_fetch(&served[op < 64 ? op : 63], 1, __ATOMIC_RELAXED);
		}
		len = fs_server_handle(srv, &iv, 1, &ov, 1);
		if (len && write(fuse_fd, out, len) < 0 && errno != ENOENT)
			break;
	}
	free(in);
	free(out);
	return NULL;
}

int main(int argc, char **argv)
{
	struct fs_export_opts o = { 0 };
	gantry_error_t err = NULL;
	pthread_t t[THREADS];
	char opts[256], *spec, *eq;
	int i = 1, root;

	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "-ro") == 0) {
			o.ro = true;
			i++;
		} else if (strcmp(argv[i], "-uid") == 0 && i + 1 < argc) {
			o.map_owner = true;
			o.uid = (uid_t)atoi(argv[i + 1]);
			i += 2;
		} else if (strcmp(argv[i], "-gid") == 0 && i + 1 < argc) {
			o.gid = (gid_t)atoi(argv[i + 1]);
			i += 2;
		} else {
			break;
		}
	}
	if (argc - i != 2 || !(eq = strchr(argv[i + 1], '='))) {
		fprintf(stderr, "usage: share_fusehost [-uid N -gid N] [-ro] MOUNTPOINT TAG=DIR\n");
		return 2;
	}
	spec = argv[i + 1];
	*eq = 0;
	root = open(eq + 1, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		perror(eq + 1);
		return 1;
	}
	if (fs_server_new(&srv, 0, 0, &err) < 0 ||
	    fs_server_add_export(srv, spec, root, &o, &err) < 0) {
		fprintf(stderr, "share_fusehost: %s\n", gantry_error_str(err));
		return 1;
	}
	fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fuse_fd < 0) {
		perror("/dev/fuse");
		return 1;
	}
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,default_permissions,allow_other",
		 fuse_fd);
	if (mount("gantry-share", argv[i], "fuse.gantry", MS_NOSUID | MS_NODEV, opts) < 0) {
		perror("mount");
		return 1;
	}
	/* As the share worker runs as root: every capability dropped, so the
	 * host's own permission checks hold for it as for its user. */
	if (getenv("FUSEHOST_KEEP_CAPS") == NULL) {
		struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct d[2] = { { 0 } };

		if (syscall(SYS_capset, &h, d) < 0) {
			perror("capset");
			return 1;
		}
	}
	if ((stats_path = getenv("FUSEHOST_STATS")) != NULL)
		signal(SIGUSR1, write_stats);
	printf("ready\n");
	fflush(stdout);
	for (int k = 0; k < THREADS; k++)
		pthread_create(&t[k], NULL, serve, NULL);
	for (int k = 0; k < THREADS; k++)
		pthread_join(t[k], NULL);
	fs_server_free(srv);
	return 0;
}
