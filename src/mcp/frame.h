/* MCP's stdio framing, as the guest's proxy carries it: JSON-RPC messages,
 * one per line (newline-delimited, no newline inside one). The reader
 * takes bytes as they come and hands out whole lines; a line longer than
 * MCP_FRAME_MAX, or one holding a NUL, is an error that ends the
 * connection (no resynchronising on a hostile stream). Pure; fuzzed
 * (tests/fuzz/fuzz_mcp_frame.c). */
#ifndef GANTRY_MCP_FRAME_H
#define GANTRY_MCP_FRAME_H

#include <stdbool.h>
#include <stddef.h>

#define MCP_FRAME_MAX (1024 * 1024)

struct mcp_reader {
	char *buf; /* MCP_FRAME_MAX + 1 */
	size_t len;
	size_t skip; /* bytes of the last line handed out, dropped on the next call */
	bool broken;
};

void mcp_reader_init(struct mcp_reader *r);
void mcp_reader_free(struct mcp_reader *r);
/* Room for the next read: *room bytes at the returned pointer (0 once
 * broken or full, which mcp_reader_next then reports). */
char *mcp_reader_space(struct mcp_reader *r, size_t *room);
void mcp_reader_wrote(struct mcp_reader *r, size_t n);
/* The next whole line, NUL-terminated and without its newline (blank
 * lines skipped): 1 with *line and *len, 0 when more bytes are needed, -1
 * when the stream is broken (*why says how). The line stays valid until
 * the next call. */
int mcp_reader_next(struct mcp_reader *r, char **line, size_t *len, const char **why);

#endif
