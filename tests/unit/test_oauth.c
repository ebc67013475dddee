/* The OAuth bridge's reading of a login URL (sandbox/oneshot_oauth.h):
 * the loopback callback port of its redirect_uri, and nothing for any
 * other redirect. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sandbox/oneshot_oauth.h"

static void test_callback_port(void **state)
{
	(void)state;
	assert_int_equal(oauth_callback_port("https://auth.example/authorize?client_id=x&"
					     "redirect_uri=http%3A%2F%2Flocalhost%3A1455%2Fauth%2F"
					     "callback&state=s"),
			 1455);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http://127.0.0.1:"
					     "54545/cb"),
			 54545);
	assert_int_equal(oauth_callback_port("https://a.example/o?x=1&redirect_uri=http%3A%2F%2F"
					     "%5B%3A%3A1%5D%3A8080"),
			 8080);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=https%3A%2F%2F"
					     "localhost%3A1455%2F"),
			 0); /* not plain http to loopback */
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http%3A%2F%2F"
					     "evil.example%3A80%2F"),
			 0);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http%3A%2F%2F"
					     "localhost%3A99999%2F"),
			 0);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http%3A%2F%2F"
					     "localhost%3A0%2F"),
			 0);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http%3A%2F%2F"
					     "localhost.evil%3A80"),
			 0);
	assert_int_equal(oauth_callback_port("https://a.example/o#redirect_uri=http://localhost:1/"),
			 0);
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=%"), 0);
	assert_int_equal(oauth_callback_port("no url at all"), 0);
	/* A privileged port is never bridged. */
	assert_int_equal(oauth_callback_port("https://a.example/o?redirect_uri=http%3A%2F%2F"
					     "localhost%3A80%2Fcb"),
			 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_callback_port) };

	return cmocka_run_group_tests(tests, NULL, NULL);
}
