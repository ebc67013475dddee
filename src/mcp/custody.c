/* The MCP gateway's auth=custody:PROVIDER remotes (see gateway.h): the
 * access token OAuth custody holds, taken when the run starts and renewed
 * by a thread of the run's own process before it expires. That process
 * holds custody; a confined gateway holds only the access tokens it is
 * sent, and cannot ask for one. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "mcp/gateway.h"
#include "oauth/custody.h"
#include "worker/worker.h"

/* Renewals of one remote this far apart at least, whatever its tokens'
 * lives (a provider's shorter than the margin would have every access
 * refresh). */
#define RENEW_GAP_S	  10
#define RENEW_BACKOFF_MAX 5 /* doublings of the gap after refusals: 320 s */
#define KEEPER_MAX_MS	  (3600 * 1000)

int mcp_gateway_custody(struct mcp_gateway *g, struct oauth_custody *custody, gantry_error_t *err)
{
	for (size_t k = 0; k < g->n; k++) {
		struct mcp_remote *r = &g->remotes[k];

		if (r->spec.auth != MCP_AUTH_CUSTODY || r->auth)
			continue;
		if (custody == NULL)
			return gantry_error_opt(err, "oauth_custody",
						" is off: MCP remote `%s` needs it "
						"(auth=custody:%s)",
						r->spec.id, r->spec.custody);
		if (oauth_custody_access(custody, r->spec.custody, &r->auth, &g->expires[k], err) <
		    0)
			return gantry_error_prefix(err, "MCP remote `%s`", r->spec.id);
		g->renewed[k] = (int64_t)time(NULL);
		g->custody = custody;
		/* The credential is the first redaction, as mcp_remote_open
		 * makes it (mcp_remote_secrets_json counts on it). */
		memmove(&r->redact[1], &r->redact[0], r->nr_redact * sizeof(r->redact[0]));
		r->redact[0] = xstrdup(r->auth);
		r->nr_redact++;
	}
	return 0;
}

/* When remote k's token is next renewed; INT64_MAX: never (not custody's,
 * or an expiry nobody knows). */
static int64_t due(const struct mcp_gateway *g, size_t k)
{
	const struct mcp_remote *r = &g->remotes[k];

	if (r->spec.auth != MCP_AUTH_CUSTODY || g->expires[k] <= 0)
		return INT64_MAX;
	/* A refresh refused again and again is tried less and less often. */
	return MAX(g->expires[k] - OAUTH_REFRESH_MARGIN_S,
		   g->renewed[k] + (RENEW_GAP_S << MIN(g->renew_fails[k], RENEW_BACKOFF_MAX)));
}

void mcp_gateway_auth(struct mcp_gateway *g, json_t *msg)
{
	json_int_t k = json_integer_value(json_object_get(msg, "remote"));
	const char *v = json_string_value(json_object_get(msg, "auth"));

	if (k < 0 || (size_t)k >= g->n || v == NULL || *v == '\0' ||
	    g->remotes[k].spec.auth != MCP_AUTH_CUSTODY) {
		log_warn("a renewed credential for no custody remote: dropped");
		return;
	}
	mcp_remote_auth_renew(&g->remotes[k], v);
}

static void renew(struct mcp_gateway *g, size_t k)
{
	struct mcp_remote *r = &g->remotes[k];
	gantry_error_t err = NULL;
	char *tok = NULL;
	int64_t at = 0;

	g->renewed[k] = (int64_t)time(NULL);
	if (oauth_custody_access(g->custody, r->spec.custody, &tok, &at, &err) < 0) {
		/* Tried again after the gap (longer each time); the remote has
		 * the old token till then. */
		log_warn("MCP remote `%s`: its token was not renewed: %s", r->spec.id,
			 gantry_error_str(err));
		gantry_error_free(&err);
		g->renew_fails[k]++;
		return;
	}
	g->renew_fails[k] = 0;
	g->expires[k] = at;
	if (g->pid > 0) {
		json_t *m = json_pack("{s:s,s:I,s:s}", "op", "auth", "remote", (json_int_t)k,
				      "auth", tok);

		if (m == NULL || worker_send_json(g->chan, m, NULL, 0) < 0)
			log_warn("MCP remote `%s`: the gateway did not take its renewed token",
				 r->spec.id);
	} else {
		mcp_remote_auth_renew(r, tok);
	}
	explicit_bzero(tok, strlen(tok));
	free(tok);
}

static void *keeper(void *opaque)
{
	struct mcp_gateway *g = opaque;

	for (;;) {
		struct pollfd p = { .fd = g->keeper_stop, .events = POLLIN };
		int64_t next = INT64_MAX, now = (int64_t)time(NULL);

		for (size_t k = 0; k < g->n; k++)
			next = MIN(next, due(g, k));
		if (next == INT64_MAX)
			return NULL;
		if (next > now) {
			int64_t ms = MIN((next - now) * 1000, (int64_t)KEEPER_MAX_MS);
			int n = poll(&p, 1, (int)ms);

			if (n > 0 || (n < 0 && errno != EINTR))
				return NULL; /* stopped (or poll broke: no more renewals) */
			continue;
		}
		for (size_t k = 0; k < g->n; k++)
			if (due(g, k) <= now)
				renew(g, k);
	}
}

int mcp_custody_keep(struct mcp_gateway *g, gantry_error_t *err)
{
	sigset_t all, old;
	bool any = false;
	int r;

	for (size_t k = 0; k < g->n; k++)
		any |= due(g, k) != INT64_MAX;
	if (!any || g->custody == NULL || g->keeper_stop >= 0)
		return 0;
	g->keeper_stop = eventfd(0, EFD_CLOEXEC);
	if (g->keeper_stop < 0)
		return gantry_error_errno(err, "the MCP gateway's token renewal");
	/* The run's signals are its main thread's to take, not the keeper's. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = pthread_create(&g->keeper, NULL, keeper, g);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		close_fd(&g->keeper_stop);
		return gantry_error(err, r, "the MCP gateway's token renewal: %s", strerror(r));
	}
	return 0;
}

void mcp_custody_stop(struct mcp_gateway *g)
{
	uint64_t one = 1;

	if (g->keeper_stop < 0)
		return;
	if (write(g->keeper_stop, &one, sizeof(one)) != sizeof(one))
		log_warn("the MCP gateway's token renewal: %s", strerror(errno));
	pthread_join(g->keeper, NULL);
	close_fd(&g->keeper_stop);
}
