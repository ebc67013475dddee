/* libFuzzer target for share specs (share_spec_parse, shares_add): any
 * text either fails with one line or parses to a share whose canonical
 * form parses back to the same canonical form. Inputs are plain text, a
 * spec; an input holding a newline is a list of specs for shares_add. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "share/spec.h"

#include "check.h"

#define FUZZ_CWD "/home/u/proj"

static void one_line(gantry_error_t *err)
{
	check(*err != NULL);
	check(strchr(gantry_error_str(*err), '\n') == NULL);
	gantry_error_free(err);
}

static void fuzz_spec(const char *s)
{
	gantry_error_t err = NULL;
	struct share_spec sp, back;
	char *canon, *again;

	if (share_spec_parse(s, FUZZ_CWD, &sp, &err) < 0) {
		one_line(&err);
		return;
	}
	check(sp.host_path[0] == '/' && sp.ctr_path[0] == '/' && strcmp(sp.ctr_path, "/") != 0);
	check(strstr(sp.ctr_path, "/../") == NULL && strstr(sp.ctr_path, "//") == NULL);
	check(strlen(sp.tag) >= 1 && strlen(sp.tag) <= SHARE_TAG_MAX);
	canon = share_spec_format(&sp);
	for (const char *c = canon; *c; c++)
		check(*c >= 0x20 && *c < 0x7f);
	check(share_spec_parse(canon, NULL, &back, &err) == 0);
	check(strcmp(back.tag, sp.tag) == 0);
	check(strcmp(back.host_path, sp.host_path) == 0);
	check(strcmp(back.ctr_path, sp.ctr_path) == 0);
	check(back.ro == sp.ro && back.ids == sp.ids && back.uid == sp.uid && back.gid == sp.gid);
	again = share_spec_format(&back);
	check(strcmp(again, canon) == 0);
	free(again);
	free(canon);
	share_spec_free(&back);
	share_spec_free(&sp);
}

static void fuzz_list(char *s)
{
	char **v = NULL, *save = NULL;
	size_t n = 0;

	for (char *line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		gantry_error_t err = NULL;
		size_t before = n;

		if (shares_add(&v, &n, line, FUZZ_CWD, &err) < 0) {
			one_line(&err);
			check(n == before);
			continue;
		}
		check(n == before + 1 && n <= SHARES_MAX && v[n] == NULL);
		/* What the list holds is canonical and readable alone. */
		check(shares_add(&v, &n, v[n - 1], NULL, NULL) < 0);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);

	memcpy(s, data, size);
	s[size] = '\0';
	if (memchr(data, '\n', size) == NULL)
		fuzz_spec(s);
	else
		fuzz_list(s);
	free(s);
	return 0;
}
