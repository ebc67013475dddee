/* Kubernetes' pod sandbox container (pause) is no workload: it holds the
 * pod's namespaces, and a VM for it would cost a VM per pod for nothing.
 * As crun does for krun, gantry-oci hands such a container to crun: the
 * create whose config.json says so (containerd's
 * io.kubernetes.cri.container-type=sandbox, CRI-O's
 * io.kubernetes.cri-o.ContainerType=sandbox) leaves a marker in ROOT/ID,
 * and every verb for that ID runs crun with the same arguments and its
 * own state under ROOT/.crun. */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/files.h"
#include "common/util.h"
#include "oci/oci.h"

#define DELEGATE_MARK "crun"
#define CRUN_SUBDIR   ".crun"

extern char **environ;

bool oci_is_pod_sandbox(json_t *annotations)
{
	const char *a = json_string_value(json_object_get(annotations,
							    "io.kubernetes.cri.container-type"));
	const char *b = json_string_value(json_object_get(annotations,
							    "io.kubernetes.cri-o.ContainerType"));

	return (a && strcmp(a, "sandbox") == 0) || (b && strcmp(b, "sandbox") == 0);
}

bool oci_delegated(const char *root, const char *id)
{
	cleanup_free char *mark = NULL;

	xasprintf(&mark, "%s/%s/%s", root, id, DELEGATE_MARK);
	return access(mark, F_OK) == 0;
}

int oci_delegate(const struct oci_delegation *d, const char *verb, const char *id, int argc,
		 char **argv)
{
	cleanup_free char *crun_root = NULL, *dir = NULL, *mark = NULL;
	char **av = xzalloc((size_t)(argc + 9) * sizeof(*av));
	int n = 0, status = 0, r;
	pid_t pid;

	xasprintf(&crun_root, "%s/%s", d->root, CRUN_SUBDIR);
	xasprintf(&dir, "%s/%s", d->root, id);
	xasprintf(&mark, "%s/%s", dir, DELEGATE_MARK);
	if (strcmp(verb, "create") == 0) {
		cleanup_free char *made = NULL;
		gantry_error_t err = NULL;

		/* ROOT/ID made here, as for any create: one that is there is
		 * another container's, to be neither marked nor removed. */
		if (oci_state_dir(d->root, id, true, &made, &err) < 0) {
			free(av);
			r = oci_fail("%s", gantry_error_str(err));
			gantry_error_free(&err);
			return r;
		}
		if (write_file_atomic(mark, "", 0, 0600, NULL) < 0) {
			rm_tree(dir);
			free(av);
			return oci_fail("create: %s: %s", mark, strerror(errno));
		}
	}
	av[n++] = (char *)d->crun;
	av[n++] = "--root";
	av[n++] = crun_root;
	if (d->log) {
		av[n++] = "--log";
		av[n++] = (char *)d->log;
	}
	if (d->log_format) {
		av[n++] = "--log-format";
		av[n++] = (char *)d->log_format;
	}
	av[n++] = (char *)verb;
	for (int i = 0; i < argc; i++)
		av[n++] = argv[i];
	fflush(NULL);
	r = posix_spawnp(&pid, d->crun, NULL, NULL, av, environ);
	free(av);
	if (r != 0) {
		if (strcmp(verb, "create") == 0)
			rm_tree(dir);
		return oci_fail("%s: the pod's sandbox container goes to %s: %s", verb, d->crun,
				strerror(r));
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	/* What crun no longer knows of is ours to forget. */
	if ((strcmp(verb, "create") == 0 && r != 0) || (strcmp(verb, "delete") == 0 && r == 0))
		rm_tree(dir);
	return r;
}
