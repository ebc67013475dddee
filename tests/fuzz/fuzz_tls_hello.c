/* libFuzzer target for the ClientHello reader (net/tls_hello.c): guest
 * bytes, read as the network worker reads them, a prefix at a time. A
 * name found is lowercase, bounded and made of DNS characters; a verdict
 * other than "more" stands as more bytes come (the worker decides at the
 * first one); "more" never comes for a whole TLS_HELLO_MAX bytes. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "net/tls_hello.h"

#include "check.h"

static void name_ok(const char *name)
{
	size_t n = strlen(name);

	check(n >= 1 && n <= TLS_NAME_MAX);
	for (size_t i = 0; i < n; i++)
		check((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-' || name[i] == '_' || name[i] == '.');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[TLS_NAME_MAX + 1], first[TLS_NAME_MAX + 1];
	enum tls_hello r, decided = TLS_HELLO_MORE;

	if (size > TLS_HELLO_MAX + 64)
		size = TLS_HELLO_MAX + 64;
	/* Every prefix, as segments would bring it (in steps, to stay fast). */
	for (size_t len = 0; len <= size; len += len < 64 ? 1 : 37) {
		r = tls_hello_name(data, len, name);
		check(tls_hello_str(r) != NULL);
		if (r == TLS_HELLO_NAME)
			name_ok(name);
		if (decided == TLS_HELLO_MORE && r != TLS_HELLO_MORE) {
			decided = r;
			if (r == TLS_HELLO_NAME)
				memcpy(first, name, sizeof(name));
		} else if (decided != TLS_HELLO_MORE) {
			check(r == decided);
			if (r == TLS_HELLO_NAME)
				check(strcmp(first, name) == 0);
		}
	}
	r = tls_hello_name(data, size, name);
	check(size < TLS_HELLO_MAX || r != TLS_HELLO_MORE);
	return 0;
}
