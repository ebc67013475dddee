/* `gantry doctor [--json]`: what this host offers Gantry, and what to
 * change where it falls short (sandbox/hostcheck.h). */
#include <jansson.h>
#include <stdio.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "common/log.h"
#include "sandbox/lifecycle.h"

static void doctor_usage(FILE *out, const struct flag *flags)
{
	fprintf(out,
		"Usage: gantry doctor [--json]\n\n"
		"Check this host for what Gantry needs: an x86-64 CPU, a usable /dev/kvm and "
		"its kind,\nuser namespaces, Landlock, seccomp, the cgroup version, free disk "
		"where sandboxes and\nimages live, the guest assets, the libraries Gantry loads "
		"and mke2fs. Each line says\nok, warn (works, with less) or fail (no sandbox "
		"boots until it is fixed), and what\nto change. Exits 0 when nothing failed, "
		"1 otherwise.\n\nFlags:\n");
	flags_usage(out, flags);
}

int cmd_doctor(int argc, char **argv)
{
	struct host_check checks[HOST_CHECKS_MAX];
	bool as_json = false, help = false, dashdash, failed;
	int rest, r;
	size_t n;
	const struct flag flags[] = {
		{ "json", FLAG_BOOL, &as_json, NULL, NULL, "print JSON", 0 },
		{ "help", FLAG_BOOL, &help, NULL, NULL, "show this help", 0 },
		{ 0 },
	};

	r = flags_parse_cmd("doctor", flags, argc, argv, &rest, &dashdash, doctor_usage);
	if (r <= 0)
		return -r;
	if (rest < argc) {
		log_error("doctor: unexpected argument `%s`", argv[rest]);
		return 2;
	}
	n = host_checks(checks, HOST_CHECKS_MAX);
	failed = host_checks_failed(checks, n);
	if (as_json) {
		json_t *o = host_checks_json(checks, n);

		cli_print_json(o);
		json_decref(o);
		return failed;
	}
	for (size_t i = 0; i < n; i++) {
		printf("%-4s  %-11s %s\n", host_status_name(checks[i].status), checks[i].name,
		       checks[i].detail);
		if (checks[i].fix[0])
			printf("      %-11s fix: %s\n", "", checks[i].fix);
	}
	printf("%s\n", failed ? "gantry cannot boot a sandbox on this host: fix what failed" :
				"this host can run gantry");
	return failed;
}
