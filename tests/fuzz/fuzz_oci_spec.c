/* libFuzzer target for gantry-oci's config.json reader (oci_spec_parse):
 * a bundle's document either fails with one line, or gives a process to
 * run (args, or none until start, an absolute cwd, NAME=VALUE env), a root path, and binds of
 * absolute paths within the bounds. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "oci/oci.h"

#include "check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct oci_spec s;
	gantry_error_t err = NULL;

	if (oci_spec_parse((const char *)data, size, "/bundle", &s, &err) < 0) {
		check(err != NULL);
		check(strchr(gantry_error_str(err), '\n') == NULL);
		gantry_error_free(&err);
		return 0;
	}
	check(s.nargs <= OCI_ARGS_MAX && (s.nargs == 0 || s.args[s.nargs] == NULL));
	check(s.cwd && s.cwd[0] == '/');
	for (size_t i = 0; i < s.nr_env; i++)
		check(strchr(s.env[i], '=') && s.env[i][0] != '=');
	check(s.root && s.root[0] == '/');
	check(s.nr_binds <= OCI_MOUNTS_MAX);
	for (size_t i = 0; i < s.nr_binds; i++)
		check(s.binds[i].source[0] == '/' && s.binds[i].destination[0] == '/');
	check(json_is_object(s.annotations));
	oci_spec_free(&s);
	return 0;
}
