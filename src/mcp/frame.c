/* MCP's newline-delimited JSON-RPC lines (see frame.h). */
#include <string.h>

#include "common/util.h"
#include "mcp/frame.h"

void mcp_reader_init(struct mcp_reader *r)
{
	*r = (struct mcp_reader){ .buf = xmalloc(MCP_FRAME_MAX + 1) };
}

void mcp_reader_free(struct mcp_reader *r)
{
	free(r->buf);
	*r = (struct mcp_reader){ 0 };
}

static void drop_handed(struct mcp_reader *r)
{
	if (r->skip) {
		memmove(r->buf, r->buf + r->skip, r->len - r->skip);
		r->len -= r->skip;
		r->skip = 0;
	}
}

char *mcp_reader_space(struct mcp_reader *r, size_t *room)
{
	drop_handed(r);
	*room = r->broken ? 0 : MCP_FRAME_MAX - r->len;
	return r->buf + r->len;
}

void mcp_reader_wrote(struct mcp_reader *r, size_t n)
{
	r->len += MIN(n, MCP_FRAME_MAX - r->len);
}

int mcp_reader_next(struct mcp_reader *r, char **line, size_t *len, const char **why)
{
	char *nl;

	drop_handed(r);
	for (;;) {
		if (r->broken) {
			*why = "the stream is broken";
			return -1;
		}
		nl = memchr(r->buf, '\n', r->len);
		if (nl == NULL) {
			if (r->len == MCP_FRAME_MAX) {
				r->broken = true;
				*why = "a message longer than 1 MiB";
				return -1;
			}
			return 0;
		}
		*len = (size_t)(nl - r->buf);
		r->skip = *len + 1;
		if (*len && r->buf[*len - 1] == '\r')
			(*len)--;
		if (memchr(r->buf, '\0', *len)) {
			r->broken = true;
			*why = "a NUL byte in a message";
			return -1;
		}
		if (*len == 0) {
			drop_handed(r);
			continue;
		}
		r->buf[*len] = '\0';
		*line = r->buf;
		return 1;
	}
}
