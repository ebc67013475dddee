/* The OAuth bridge's reading of a login URL (sandbox/oneshot_oauth.h):
 * the loopback callback port of its redirect_uri, and nothing for any
 * other redirect. OAuth custody's pure parts (oauth/custody.h): the
 * providers' file, the endpoints it takes, the browser's callback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/error.h"
#include "oauth/custody.h"
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

static void test_urls_and_names(void **state)
{
	(void)state;
	assert_true(oauth_url_valid("https://auth.example/token"));
	assert_true(oauth_url_valid("http://127.0.0.1:8080/token"));
	assert_true(oauth_url_valid("http://[::1]/t"));
	assert_true(oauth_url_valid("http://localhost:1/t"));
	assert_false(oauth_url_valid("http://auth.example/token"));
	assert_false(oauth_url_valid("http://127.0.0.1.evil.example/token"));
	assert_false(oauth_url_valid("http://localhostevil/t"));
	assert_false(oauth_url_valid("https://user:pw@auth.example/t"));
	assert_false(oauth_url_valid("https:///t"));
	assert_false(oauth_url_valid("https://a.example/t x"));
	assert_false(oauth_url_valid("ftp://a.example/"));
	assert_true(oauth_name_valid("codex"));
	assert_true(oauth_name_valid("my-idp.v2"));
	assert_false(oauth_name_valid(""));
	assert_false(oauth_name_valid("-x"));
	assert_false(oauth_name_valid("a b"));
	assert_false(oauth_name_valid("a/b"));
	assert_false(oauth_name_valid("abcdefghijabcdefghijabcdefghijabc"));
}

static int parse(const char *doc, struct oauth_provider **p, size_t *n, char *why, size_t cap)
{
	gantry_error_t err = NULL;
	int r = oauth_providers_parse(doc, strlen(doc), p, n, &err);

	snprintf(why, cap, "%s", r < 0 ? gantry_error_str(err) : "");
	gantry_error_free(&err);
	return r;
}

static void test_providers_file(void **state)
{
	struct oauth_provider *p;
	char why[512];
	size_t n;

	(void)state;
	assert_int_equal(parse("{\"idp\": {\"authorize\": \"https://idp.example/a?x=1\", "
			       "\"token\": \"http://127.0.0.1:9/t\", \"clientId\": \"c1\", "
			       "\"scope\": \"openid\", \"callbackPort\": 1455, "
			       "\"callbackPath\": \"/auth/cb\", \"tokenBody\": \"json\", "
			       "\"params\": {\"a b\": \"c&d\"}}}",
			       &p, &n, why, sizeof(why)),
			 0);
	assert_int_equal(n, 1);
	assert_string_equal(p[0].name, "idp");
	assert_string_equal(p[0].client_id, "c1");
	assert_int_equal(p[0].port, 1455);
	assert_string_equal(p[0].path, "/auth/cb");
	assert_true(p[0].json);
	assert_string_equal(p[0].params, "a%20b=c%26d");
	oauth_providers_free(p, n);

	/* Defaults: any port, /callback, a form. */
	assert_int_equal(parse("{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
			       "\"https://i.example/t\", \"clientId\": \"c\"}}",
			       &p, &n, why, sizeof(why)),
			 0);
	assert_int_equal(p[0].port, 0);
	assert_string_equal(p[0].path, "/callback");
	assert_false(p[0].json);
	oauth_providers_free(p, n);

	static const struct {
		const char *doc, *why;
	} bad[] = {
		{ "[]", "an object" },
		{ "{\"i\": {\"token\": \"https://i.example/t\", \"clientId\": \"c\"}}",
		  "authorize" },
		{ "{\"i\": {\"authorize\": \"http://i.example/a\", \"token\": "
		  "\"https://i.example/t\", \"clientId\": \"c\"}}",
		  "https://" },
		{ "{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
		  "\"http://10.0.0.1/t\", \"clientId\": \"c\"}}",
		  "https://" },
		{ "{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
		  "\"https://i.example/t\", \"clientId\": \"c\", \"callbackPort\": 80}}",
		  "callbackPort" },
		{ "{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
		  "\"https://i.example/t\", \"clientId\": \"c\", \"callbackPath\": \"cb\"}}",
		  "callbackPath" },
		{ "{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
		  "\"https://i.example/t\", \"clientId\": \"c\", \"tokenBody\": \"xml\"}}",
		  "tokenBody" },
		{ "{\"i\": {\"authorize\": \"https://i.example/a\", \"token\": "
		  "\"https://i.example/t\", \"clientId\": \"c\", \"secret\": \"s\"}}",
		  "unknown key `secret`" },
		{ "{\"a b\": {}}", "provider `a b`" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i].doc, &p, &n, why, sizeof(why)), -1);
		if (strstr(why, bad[i].why) == NULL)
			fail_msg("%s: `%s` lacks `%s`", bad[i].doc, why, bad[i].why);
		assert_null(strchr(why, '\n'));
	}
}

static void test_providers_load(void **state)
{
	char path[] = "/tmp/gantry-oauth-XXXXXX";
	struct oauth_provider *p;
	gantry_error_t err = NULL;
	size_t n;
	int fd = mkstemp(path);
	const char doc[] = "{\"codex\": {\"authorize\": \"https://mine.example/a\", "
			   "\"token\": \"https://mine.example/t\", \"clientId\": \"mine\"}}";

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, doc, sizeof(doc) - 1), (ssize_t)(sizeof(doc) - 1));
	close(fd);
	/* Gantry's alone, then the file's codex in place of Gantry's. */
	assert_int_equal(oauth_providers_load(NULL, &p, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(p[0].name, "codex");
	assert_int_equal(p[0].port, 1455);
	oauth_providers_free(p, n);
	assert_int_equal(oauth_providers_load(path, &p, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_string_equal(p[0].name, "claude");
	assert_string_equal(p[1].name, "codex");
	assert_string_equal(p[1].client_id, "mine");
	oauth_providers_free(p, n);
	unlink(path);
	assert_int_equal(oauth_providers_load(path, &p, &n, &err), 0); /* missing: Gantry's */
	assert_int_equal(n, 2);
	oauth_providers_free(p, n);
}

static void test_callback(void **state)
{
	gantry_error_t err = NULL;
	char *code;

	(void)state;
	assert_int_equal(oauth_callback_parse("GET /cb?code=a%2Bb&state=s1 HTTP/1.1\r\n\r\n",
					      "/cb", "s1", &code, &err),
			 1);
	assert_string_equal(code, "a+b");
	free(code);
	/* Not ours: another path, a longer one, no state, another state. */
	assert_int_equal(oauth_callback_parse("GET /cbx?code=a&state=s1 HTTP/1.1\r\n", "/cb",
					      "s1", &code, &err),
			 0);
	assert_int_equal(oauth_callback_parse("GET /favicon.ico HTTP/1.1\r\n", "/cb", "s1",
					      &code, &err),
			 0);
	assert_int_equal(oauth_callback_parse("GET /cb?code=a HTTP/1.1\r\n", "/cb", "s1", &code,
					      &err),
			 0);
	assert_int_equal(oauth_callback_parse("GET /cb?code=a&state=s2 HTTP/1.1\r\n", "/cb",
					      "s1", &code, &err),
			 0);
	assert_int_equal(oauth_callback_parse("POST /cb?code=a&state=s1 HTTP/1.1\r\n", "/cb",
					      "s1", &code, &err),
			 0);
	assert_int_equal(oauth_callback_parse("GET /cb?state=s1%00&code=a HTTP/1.1\r\n", "/cb",
					      "s1", &code, &err),
			 0);
	/* The provider's refusal, its text made safe. */
	assert_int_equal(oauth_callback_parse("GET /cb?state=s1&error=access_denied&"
					      "error_description=no%1b%5B31m HTTP/1.1\r\n",
					      "/cb", "s1", &code, &err),
			 -1);
	assert_non_null(strstr(gantry_error_str(err), "access_denied: no?[31m"));
	gantry_error_free(&err);
	assert_int_equal(oauth_callback_parse("GET /cb?state=s1&code= HTTP/1.1\r\n", "/cb", "s1",
					      &code, &err),
			 -1);
	gantry_error_free(&err);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_callback_port), cmocka_unit_test(test_urls_and_names),
		cmocka_unit_test(test_providers_file), cmocka_unit_test(test_providers_load),
		cmocka_unit_test(test_callback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
