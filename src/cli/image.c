/* `gantry image`: the image cache and registries. pull, ls, rm and prune
 * live here; login, logout and credentials in image_login.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/image.h"
#include "common/util.h"
#include "sandbox/lifecycle.h"

#define IMAGE_USAGE_ERROR 2

int image_parse(const char *cmd, const struct flag *flags, int argc, char **argv, char ***pos,
		int *npos, gantry_error_t *err)
{
	int i = 0;

	*pos = xzalloc((size_t)(argc + 1) * sizeof(**pos));
	*npos = 0;
	/* Flags may come after the positional arguments too. */
	while (i < argc) {
		bool dashdash;
		int rest;

		if (flags_parse(cmd, flags, argc - i, argv + i, &rest, &dashdash, err) < 0)
			return -1;
		i += rest;
		if (dashdash) {
			while (i < argc)
				(*pos)[(*npos)++] = argv[i++];
			break;
		}
		if (i < argc)
			(*pos)[(*npos)++] = argv[i++];
	}
	return 0;
}

int image_fail(gantry_error_t *err)
{
	return cli_fail(err, CLI_EXIT_FAILED);
}

static void usage_of(FILE *out, const char *synopsis, const char *text, const struct flag *flags)
{
	fprintf(out, "Usage: gantry image %s\n\n%s\n", synopsis, text);
	if (flags[0].name && strcmp(flags[0].name, "help") != 0) {
		fprintf(out, "\nFlags:\n");
		flags_usage(out, flags);
	}
}

/* Parse; 0 to go on, else the exit status (help, or a usage error). */
int image_args(const char *cmd, const char *synopsis, const char *text, const struct flag *flags,
	       int argc, char **argv, int min, int max, char ***pos, int *npos)
{
	gantry_error_t err = NULL;
	bool *help = NULL;

	for (const struct flag *f = flags; f->name; f++)
		if (strcmp(f->name, "help") == 0)
			help = f->target;
	if (image_parse(cmd, flags, argc, argv, pos, npos, &err) < 0) {
		gantry_error_print(&err);
		return IMAGE_USAGE_ERROR;
	}
	if (help && *help) {
		usage_of(stdout, synopsis, text, flags);
		return -1;
	}
	if (*npos < min || (max >= 0 && *npos > max)) {
		fprintf(stderr, "gantry: %s: want %s (see gantry %s -help)\n", cmd, synopsis, cmd);
		return IMAGE_USAGE_ERROR;
	}
	return 0;
}

#define HELP_FLAG IMAGE_HELP_FLAG

static int image_pull(int argc, char **argv)
{
	struct image_resolve_opts o = { .pull = true, .progress_fd = STDERR_FILENO };
	cleanup_free char **pos = NULL;
	gantry_error_t err = NULL;
	struct image img;
	bool help = false;
	int npos, r;
	const struct flag flags[] = {
		{ "platform", FLAG_STRING, &o.platform, NULL, "P",
		  "linux/ARCH[/VARIANT] to take from a multi-platform image\n"
		  "                         (default: this host's)", 0 },
		{ "insecure", FLAG_BOOL, &o.insecure, NULL, NULL,
		  "plain HTTP to this registry (loopback registries always use it)", 0 },
		HELP_FLAG(&help),
		{ 0 },
	};

	r = image_args("image pull", "pull [-platform P] [-insecure] SRC",
		       "Fetch SRC (a registry reference, OCI layout, docker-save tar) into the\n"
		       "image cache, resolving a tag again, and print its digest.",
		       flags, argc, argv, 1, 1, &pos, &npos);
	if (r)
		return r < 0 ? 0 : r;
	if (sandbox_image_pull(pos[0], &o, &img, &err) < 0)
		return image_fail(&err);
	printf("%s %s%s\n", img.source, img.digest ? img.digest : "(prebuilt)",
	       img.converted ? "" : " (cached)");
	image_free(&img);
	return 0;
}

static void human_size(char *buf, size_t n, uint64_t v)
{
	if (v >= GiB)
		snprintf(buf, n, "%.2f GiB", (double)v / (double)GiB);
	else
		snprintf(buf, n, "%.1f MiB", (double)v / (double)MiB);
}

static void ls_print(const struct image_entry *e, size_t n, bool quiet)
{
	if (!quiet)
		printf("%-52s %-19s %10s  %s\n", "REFERENCE", "DIGEST", "SIZE", "CREATED");
	for (size_t i = 0; i < n; i++) {
		char size[32], short_d[20];

		if (quiet) {
			printf("%s\n", e[i].digest);
			continue;
		}
		human_size(size, sizeof(size), e[i].size);
		snprintf(short_d, sizeof(short_d), "%.19s", e[i].digest);
		for (size_t r = 0; r < MAX(e[i].nrefs, (size_t)1); r++)
			printf("%-52s %-19s %10s  %s\n", e[i].nrefs ? e[i].refs[r] : "<none>",
			       short_d, size, e[i].created ? e[i].created : "-");
	}
}

static void ls_json(const struct image_entry *e, size_t n)
{
	json_t *a = image_entries_json(e, n);
	char *text = json_dumps(a, JSON_INDENT(2));

	json_decref(a);
	printf("%s\n", text ? text : "[]");
	free(text);
}

static int image_ls(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	struct image_entry *e;
	gantry_error_t err = NULL;
	bool help = false, quiet = false, as_json = false;
	size_t n;
	int npos, r;
	const struct flag flags[] = {
		{ "q", FLAG_BOOL, &quiet, NULL, NULL, "print full digests only", 0 },
		{ "json", FLAG_BOOL, &as_json, NULL, NULL,
		  "print a JSON array, one object per image", 0 },
		HELP_FLAG(&help),
		{ 0 },
	};

	r = image_args("image ls", "ls [-q | -json]",
		       "List the complete images in the cache with the references that point\n"
		       "at them, newest first. -json prints an array of objects with\n"
		       "references (an array, empty for none), digest, keyed_by (manifest or\n"
		       "config: what the digest is the digest of; null in old entries), size\n"
		       "(bytes of the EROFS image), created and source.",
		       flags, argc, argv, 0, 0, &pos, &npos);
	if (r)
		return r < 0 ? 0 : r;
	if (quiet && as_json) {
		fprintf(stderr, "gantry: image ls: -q and -json do not go together\n");
		return IMAGE_USAGE_ERROR;
	}
	if (sandbox_image_list(&e, &n, &err) < 0)
		return image_fail(&err);
	if (as_json)
		ls_json(e, n);
	else
		ls_print(e, n, quiet);
	image_entries_free(e, n);
	return 0;
}

static int image_rm(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	gantry_error_t err = NULL;
	bool help = false;
	int npos, r, status = 0;
	const struct flag flags[] = { HELP_FLAG(&help), { 0 } };

	r = image_args("image rm", "rm REF|DIGEST...",
		       "Remove references from the cache, and an image when no reference to\n"
		       "it is left; a digest (or a unique prefix of one) removes the image and\n"
		       "every reference to it. Images a saved sandbox uses are kept.",
		       flags, argc, argv, 1, -1, &pos, &npos);
	if (r)
		return r < 0 ? 0 : r;
	for (int i = 0; i < npos; i++) {
		cleanup_free char *digest = NULL;

		if (sandbox_image_remove(pos[i], &digest, &err) < 0) {
			status = image_fail(&err);
			continue;
		}
		printf("removed %s%s%s\n", pos[i], digest ? " " : "", digest ? digest : "");
	}
	return status;
}

static int image_prune_cmd(int argc, char **argv)
{
	cleanup_free char **pos = NULL;
	gantry_error_t err = NULL;
	bool help = false;
	uint64_t freed;
	size_t removed;
	char size[32];
	int npos, r;
	const struct flag flags[] = { HELP_FLAG(&help), { 0 } };

	r = image_args("image prune", "prune",
		       "Remove every cached image that no saved sandbox uses, and what\n"
		       "interrupted pulls left behind.",
		       flags, argc, argv, 0, 0, &pos, &npos);
	if (r)
		return r < 0 ? 0 : r;
	if (sandbox_image_prune(&removed, &freed, &err) < 0)
		return image_fail(&err);
	human_size(size, sizeof(size), freed);
	printf("removed %zu image%s, freed %s\n", removed, removed == 1 ? "" : "s", size);
	return 0;
}

static const struct image_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
} image_cmds[] = {
	{ "pull", image_pull, "fetch an image into the cache" },
	{ "ls", image_ls, "list cached images" },
	{ "rm", image_rm, "remove a reference or an image from the cache" },
	{ "prune", image_prune_cmd, "remove images no saved sandbox uses" },
	{ "login", image_login, "store credentials for a registry" },
	{ "logout", image_logout, "forget stored credentials for a registry" },
	{ "credentials", image_credentials, "say where each registry's credentials come from" },
};

static void image_usage(FILE *out)
{
	fprintf(out,
		"Usage: gantry image COMMAND [FLAGS] [ARGS]\n\n"
		"Images come from registries (`python:3.12`, `host:port/path:tag`,\n"
		"`name@sha256:...`; Docker Hub by default), OCI layout directories,\n"
		"docker-save tars and .erofs files. Each is flattened once into EROFS and\n"
		"cached by its platform manifest's digest in $GANTRY_IMAGES (default\n"
		"~/.gantry/images); `exec -image REF` uses the cached image without asking\n"
		"the registry again. Registries on loopback and those listed in\n"
		"GANTRY_INSECURE_REGISTRIES are spoken to over plain HTTP, all others\n"
		"over HTTPS; proxies come from http_proxy, https_proxy and no_proxy.\n\n"
		"Commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(image_cmds); i++)
		fprintf(out, "  %-12s %s\n", image_cmds[i].name, image_cmds[i].summary);
	fprintf(out, "\nRun `gantry image COMMAND -help` for a command's flags.\n");
}

int cmd_image(int argc, char **argv)
{
	if (argc < 1) {
		image_usage(stderr);
		return IMAGE_USAGE_ERROR;
	}
	if (strcmp(argv[0], "-h") == 0 || strcmp(argv[0], "-help") == 0 ||
	    strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "help") == 0) {
		image_usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(image_cmds); i++)
		if (strcmp(argv[0], image_cmds[i].name) == 0)
			return image_cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "gantry: image: unknown command `%s` (see gantry image -help)\n", argv[0]);
	return IMAGE_USAGE_ERROR;
}
