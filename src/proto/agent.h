/* The host/guest agent protocol: what `gantry` and gantry-init (PID 1 in the
 * guest) say to each other over virtio-vsock. Both sides compile this header,
 * codec.c (frames and messages) and stream.c (frames on file descriptors),
 * so they use nothing but libc and common/text.c.
 *
 * Connections (both dialled by the guest, so the host only listens):
 *  - control: gantry-init connects to host port PROTO_CONTROL_PORT as soon as
 *    it runs and sends HELLO, then READY once it can run processes. The host
 *    sends EXEC, SIGNAL, RESIZE, SHUTDOWN; the guest answers STARTED, EXIT,
 *    ERROR. Exit status travels here, never in a byte stream.
 *  - stdio: one stream per process. The guest connects to host port
 *    PROTO_STDIO_PORT, sends STREAM naming the session id, then STDOUT and
 *    STDERR data frames (one output stream, STDOUT, with a tty) and an EOF
 *    frame for each when it ends; the host sends STDIN frames and EOF(stdin).
 *
 * Frame: an 8-byte header, then the body.
 *   u32 body length (little-endian), u16 type, u16 flags (reserved, must be 0)
 * A body is at most PROTO_MAX_CONTROL bytes, and a data frame's at most
 * PROTO_MAX_DATA. Body fields are little-endian; a string is a u32 length and
 * that many bytes (no NUL inside); a string array is a u32 count and the
 * strings; a gid list is a u32 count and u32s. A frame whose body is not
 * exactly its fields (short, trailing bytes, bad length, over a bound) is an
 * error, never a crash.
 *
 * Messages (direction, body):
 *   HELLO     g->h  version u32, uptime_ms u64, ncpus u32, kernel str
 *   READY     g->h  message str: empty once the container root is assembled
 *                   (in a sandbox: once its long-lived container runs), else
 *                   why it cannot be; sent once, right after HELLO's work
 *   EXEC      h->g  id u32, argv strv, env strv, cwd str, uid u32, gid u32,
 *                   gids u32-list, flags u32 (PROTO_EXEC_*), rows u32, cols u32;
 *                   with PROTO_EXEC_RLIMITS then a u32 count and that many
 *                   (resource u32, soft u64, hard u64); with PROTO_EXEC_CAPS
 *                   then five u64 capability masks (PROTO_CAPS_*)
 *   STARTED   g->h  id u32, pid u32 (in the guest's namespace)
 *   EXIT      g->h  id u32, signaled u32 (0 or 1), code u32 (status 0-255, or
 *                   the signal number 1-64 when signaled)
 *   ERROR     g->h  id u32 (0: not about one session), code u32 (126: cannot
 *                   run, 127: not found, 125: runtime failure), message str
 *   SIGNAL    h->g  id u32, signo u32
 *   RESIZE    h->g  id u32, rows u32, cols u32
 *   SHUTDOWN  h->g  status u32 (0-255): sync, unmount, power off with status
 *   STREAM    g->h  id u32: first frame of a stdio stream
 *   STDIN     h->g  raw bytes (1..PROTO_MAX_DATA)
 *   STDOUT    g->h  raw bytes
 *   STDERR    g->h  raw bytes
 *   EOF       both  fd u32 (0 stdin, 1 stdout, 2 stderr): no more data on it
 *   MOUNT     h->g  id u32, flags u32 (PROTO_MOUNT_RO), tag str, path str: bind
 *                   the share hub's directory TAG at path in the running
 *                   container (a sandbox's long-lived one), making path
 *   UNMOUNT   h->g  id u32, path str: detach what is mounted at path there
 *   DONE      g->h  id u32, error u32 (0, or the errno that failed it),
 *                   message str (empty, or why): the answer to MOUNT/UNMOUNT
 *   RENEW     h->g  time_ns u64 (the host's wall clock), entropy 4 x u64,
 *                   hostname str (empty: keep it), shares strv (each as
 *                   gantry.share= has it, TAG:MODE:B64PATH), and only
 *                   when there is one ca str (the restored VM's egress CA
 *                   as gantry.ca= has it): the host's
 *                   answer to a HELLO on a restored VM's new control
 *                   connection (a snapshot's vsock reset cut the old one)
 *   RENEWED   g->h  flags u32 (PROTO_RENEWED_*: what was done), message str
 *                   (empty, or what failed): the answer to RENEW, in place
 *                   of READY; the host refuses a restored guest without it
 *
 * A session ends for the host when it has EXIT (or ERROR) on the control
 * connection and EOF for every output on the stream (or the stream closed).
 */
#ifndef GANTRY_PROTO_AGENT_H
#define GANTRY_PROTO_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_VERSION	   2
#define PROTO_CONTROL_PORT 1025
#define PROTO_STDIO_PORT   1026
/* Host-bound secrets: the container's credential helper dials this host
 * port and writes git's credential description (git-credential(1):
 * protocol=, host=, path=, username= lines, then a blank line, at most
 * 4 KiB); the host answers username= and password= lines, or one error=
 * line, and a blank line, then closes. */
#define PROTO_BROKER_PORT 1027
/* Host Unix sockets relayed into the container (gantry wrap -socket): a
 * stream from the guest names the socket by its index in the command
 * line's gantry.sock= tokens (4 bytes, little-endian), then carries its
 * bytes both ways. */
#define PROTO_SOCKET_PORT 1030
/* The MCP gateway (mcp/gateway.h): `gantry-guest mcp-proxy` carries its
 * stdio here, newline-delimited JSON-RPC both ways. */
#define PROTO_MCP_PORT 1029
/* ... and with this one, that proxy. */
#define PROTO_MCP_ARG "mcp-proxy"
/* The gateway's built-in fs server (gantry.mcpfs=): the gateway sends
 * the proxy, on the same stream, a line that starts with PROTO_MCP_FS_MARK
 * (never the first byte of JSON), "\x1eSEQ read|list B64URL-PATH\n"; the
 * proxy carries it to gantry-init's fs server (PROTO_MCP_FS_SOCKET in the
 * container, where each connection takes one such line) and that
 * server's answer back, "\x1eSEQ ok B64URL-DATA\n" or "\x1eSEQ err
 * TEXT\n". The proxy forwards the client's messages whole lines at a
 * time, so that nothing is put inside one. A file read is at most
 * PROTO_MCP_FS_MAX bytes, a listing as much text. */
#define PROTO_MCP_FS_MARK   '\x1e'
#define PROTO_MCP_FS_SOCKET "/dev/.gantry-mcp-fs"
#define PROTO_MCP_FS_MAX    (512 * 1024)
#define PROTO_MCP_FS_LINE   (PROTO_MCP_FS_MAX / 3 * 4 + 128)
/* The OAuth bridge (gantry wrap): `gantry-guest open-url URL`, the
 * guest's BROWSER, dials this host port and writes the URL a login tool
 * would open, one line (at most PROTO_OAUTH_URL_MAX); the host answers one
 * line ("ok" or why not). */
#define PROTO_OAUTH_PORT     1031
#define PROTO_OAUTH_URL_MAX  8192
#define PROTO_OPEN_URL_ARG   "open-url"
/* ... and the host dials this guest port (gantry.oauth=1) to replay the
 * browser's callback: 2 bytes of the guest's loopback TCP port, then the
 * request's bytes both ways. */
#define PROTO_OAUTH_REPLAY_PORT 1032
/* OAuth custody (oauth/custody.h): `gantry-guest oauth login|token NAME`
 * dials this host port and writes that one line; the host answers one
 * line, a JSON object (at most PROTO_CUSTODY_ANSWER_MAX) or why not, and
 * closes. */
#define PROTO_CUSTODY_PORT	 1033
#define PROTO_CUSTODY_ANSWER_MAX (64 * 1024)
#define PROTO_OAUTH_ARG		 "oauth"
/* The helper, bound into every container: git runs it with the
 * operation after PROTO_HELPER_ARG; the host runs it as a session with
 * PROTO_FILES_ARG for files (proto/files.h). */
#define PROTO_HELPER_PATH "/dev/.gantry-guest"
#define PROTO_HELPER_ARG  "credential"
/* ... and with this one, a small init that runs the rest of its command
 * line as its child (gantry wrap: the command as a plain process, not
 * its container's PID 1; guest/reaper.c). */
#define PROTO_INIT_ARG "init"

#define PROTO_HDR_SIZE	  8
#define PROTO_MAX_CONTROL (64 * 1024) /* body of any frame */
#define PROTO_MAX_DATA	  (32 * 1024) /* body of a STDIN/STDOUT/STDERR frame */
#define PROTO_MAX_FRAME	  (PROTO_HDR_SIZE + PROTO_MAX_CONTROL)
#define PROTO_MAX_STRING  (32 * 1024) /* one string */
#define PROTO_MAX_STRV	  4096	      /* strings in one array */
#define PROTO_MAX_GIDS	  256	      /* supplementary groups */
#define PROTO_MAX_SIGNAL  64
#define PROTO_MAX_RLIMITS 16 /* RLIMIT_* resources, each at most once */
#define PROTO_MAX_CAP	  63 /* a capability's number: a bit of a u64 */

/* Exit codes for ERROR, as docker and shells use them. */
#define PROTO_ERR_RUNTIME   125
#define PROTO_ERR_CANNOT    126
#define PROTO_ERR_NOT_FOUND 127

#define PROTO_EXEC_TTY 0x1u
/* The process's resource limits instead of the guest's default (an OCI
 * config.json's process.rlimits), and its capability sets instead of the
 * guest's (process.capabilities). */
#define PROTO_EXEC_RLIMITS 0x2u
#define PROTO_EXEC_CAPS	   0x4u
/* The container's own process (gantry-oci's): when it ends, so does every
 * other process of the sandbox's container, as the end of a PID
 * namespace's init ends the rest, and later EXECs are refused. */
#define PROTO_EXEC_INIT 0x8u
#define PROTO_EXEC_ALL	(PROTO_EXEC_TTY | PROTO_EXEC_RLIMITS | PROTO_EXEC_CAPS | PROTO_EXEC_INIT)

/* EXEC's capability sets, in order, each a mask of 1 << CAP_*. */
enum { PROTO_CAPS_BOUNDING,
       PROTO_CAPS_EFFECTIVE,
       PROTO_CAPS_PERMITTED,
       PROTO_CAPS_INHERITABLE,
       PROTO_CAPS_AMBIENT,
       PROTO_CAPS_SETS };

struct proto_rlimit {
	uint32_t resource; /* RLIMIT_*, below PROTO_MAX_RLIMITS */
	uint64_t soft, hard;
};

/* names.c: a resource's or a capability's name as config.json spells it
 * (RLIMIT_NOFILE, CAP_KILL), NULL past the known ones; and back, any
 * case, -1 for a name not known. */
const char *proto_rlimit_name(unsigned int resource);
const char *proto_cap_name(unsigned int cap);
int proto_rlimit_number(const char *name);
int proto_cap_number(const char *name);

/* RENEW: what a restored guest renews before its workload runs on. */
#define PROTO_RENEW_WORDS     4 /* entropy, u64s */
#define PROTO_MAX_SHARES      64
#define PROTO_RENEWED_RANDOM  0x1u /* entropy added, the CRNG reseeded */
#define PROTO_RENEWED_CLOCK   0x2u /* the wall clock set */
#define PROTO_RENEWED_SHARES  0x4u /* shares bound again from the new server */
#define PROTO_RENEWED_ID      0x8u /* hostname and machine-id renewed */
#define PROTO_RENEWED_CA      0x10u /* the egress CA the container trusts replaced */
#define PROTO_RENEWED_ALL     0x3fu
#define PROTO_MAX_CA	      4096 /* RENEW's ca, base64 */
/* RENEW's config: the gantry.* parameters of a template's boot
 * (gantry.template=1), which waits at its first HELLO for them. */
#define PROTO_MAX_CONFIG      8192
#define PROTO_RENEWED_CONFIG  0x20u /* the boot went on with RENEW's config */

#define PROTO_MOUNT_RO	0x1u
#define PROTO_MOUNT_ALL PROTO_MOUNT_RO
#define PROTO_MAX_PATH	4096 /* MOUNT's and UNMOUNT's path, bytes */
#define PROTO_MAX_TAG	36   /* MOUNT's tag */

enum proto_type {
	PROTO_HELLO = 1,
	PROTO_EXEC = 2,
	PROTO_STARTED = 3,
	PROTO_EXIT = 4,
	PROTO_ERROR = 5,
	PROTO_SIGNAL = 6,
	PROTO_RESIZE = 7,
	PROTO_SHUTDOWN = 8,
	PROTO_READY = 9,
	PROTO_MOUNT = 10,
	PROTO_UNMOUNT = 11,
	PROTO_DONE = 12,
	PROTO_RENEW = 13,
	PROTO_RENEWED = 14,
	PROTO_STREAM = 16,
	PROTO_STDIN = 17,
	PROTO_STDOUT = 18,
	PROTO_STDERR = 19,
	PROTO_EOF = 20,
};

struct proto_hello {
	uint32_t version;
	uint64_t uptime_ms;
	uint32_t ncpus;
	char *kernel;
};

struct proto_exec {
	uint32_t id;
	char **argv; /* NULL-terminated; argc entries */
	uint32_t argc;
	char **env; /* NULL-terminated; envc entries */
	uint32_t envc;
	char *cwd;
	uint32_t uid, gid;
	uint32_t *gids;
	uint32_t ngids;
	uint32_t flags;
	uint32_t rows, cols;
	struct proto_rlimit *rlimits; /* PROTO_EXEC_RLIMITS */
	uint32_t nrlimits;
	uint64_t caps[PROTO_CAPS_SETS]; /* PROTO_EXEC_CAPS */
};

struct proto_exit {
	uint32_t id;
	bool signaled;
	uint32_t code;
};

struct proto_error {
	uint32_t id;
	uint32_t code;
	char *message;
};

/* One decoded frame. Strings and arrays are allocated (proto_msg_free);
 * data points into the buffer it was decoded from. The strings a guest sends
 * for display (HELLO's kernel, READY's, ERROR's, DONE's and RENEWED's
 * message) come out of the decoder sanitised by text_sanitize
 * (common/text.h); EXEC's stay exact. */
struct proto_msg {
	uint16_t type;
	union {
		struct proto_hello hello;
		struct proto_exec exec;
		struct {
			uint32_t id, pid;
		} started;
		struct proto_exit exit;
		struct proto_error error;
		struct {
			char *message;
		} ready;
		struct {
			uint32_t id, signo;
		} signal;
		struct {
			uint32_t id, rows, cols;
		} resize;
		struct {
			uint32_t status;
		} shutdown;
		struct {
			uint32_t id;
		} stream;
		struct {
			const uint8_t *data;
			size_t len;
		} data; /* STDIN, STDOUT, STDERR */
		struct {
			uint32_t fd;
		} eof;
		struct {
			uint32_t id, flags;
			char *tag, *path;
		} mount; /* MOUNT; UNMOUNT has no tag or flags */
		struct {
			uint32_t id, error;
			char *message;
		} done;
		struct {
			uint64_t time_ns;
			uint64_t entropy[PROTO_RENEW_WORDS];
			char *hostname;
			char **shares; /* NULL-terminated; nr_shares entries */
			uint32_t nr_shares;
			char *ca;
			char *config; /* "" but for a template's boot */
		} renew;
		struct {
			uint32_t flags;
			char *message;
		} renewed;
	} u;
};

/* --- body codec -------------------------------------------------------- */

/* Writes a frame into a caller's buffer; the first error sticks and makes
 * proto_writer_finish fail, so callers check once. */
struct proto_writer {
	uint8_t *buf;
	size_t cap;
	size_t len;
	bool overflow;
};

void proto_writer_init(struct proto_writer *w, void *buf, size_t cap);
void proto_put_u32(struct proto_writer *w, uint32_t v);
void proto_put_u64(struct proto_writer *w, uint64_t v);
void proto_put_bytes(struct proto_writer *w, const void *p, size_t n);
void proto_put_str(struct proto_writer *w, const char *s);
void proto_put_strv(struct proto_writer *w, char *const *v, size_t n);
/* Fill in the header; the frame length, or -1 if it overflowed or its body
 * is over the bound for its type. */
ssize_t proto_writer_finish(struct proto_writer *w, uint16_t type);

/* Reads fields out of one body; every read is bounds-checked. On failure it
 * returns -1 and r->err says why (a static string). */
struct proto_reader {
	const uint8_t *p;
	size_t len;
	size_t off;
	const char *err;
};

void proto_reader_init(struct proto_reader *r, const void *body, size_t len);
int proto_get_u32(struct proto_reader *r, uint32_t *v);
int proto_get_u64(struct proto_reader *r, uint64_t *v);
/* Allocated, NUL-terminated copy; NULs inside and lengths over max fail. */
int proto_get_str(struct proto_reader *r, size_t max, char **s);
/* Allocated NULL-terminated array of at most max strings. */
int proto_get_strv(struct proto_reader *r, size_t max, char ***v, uint32_t *n);
/* Fails unless every byte was read. */
int proto_reader_end(struct proto_reader *r);

/* --- frames --------------------------------------------------------------- */

/* Largest body a frame of this type may have; 0 for an unknown type. */
size_t proto_max_body(uint16_t type);
const char *proto_type_name(uint16_t type);

/* Check a header: the body length (0 and -1 with *why on a bad header). */
int proto_parse_header(const uint8_t hdr[PROTO_HDR_SIZE], uint16_t *type, uint32_t *len,
		       const char **why);

/* Encode m as one frame into buf; its length, or -1 (too big, bad field). */
ssize_t proto_encode(const struct proto_msg *m, void *buf, size_t cap);
/* Decode exactly one whole frame (header included). 0, or -1 and *why. */
int proto_decode(const void *frame, size_t len, struct proto_msg *m, const char **why);
void proto_msg_free(struct proto_msg *m);

/* Blocking: read exactly one frame from fd into buf (PROTO_MAX_FRAME bytes)
 * and decode it. 1 on a frame, 0 on EOF before its first byte, -1 with errno
 * set and *why (EPROTO for a malformed or truncated frame). */
int proto_read_msg(int fd, void *buf, struct proto_msg *m, const char **why);
/* Blocking: encode and write one frame (MSG_NOSIGNAL on sockets). 0 or -1
 * with errno (EMSGSIZE when it does not fit a frame). */
int proto_write_msg(int fd, const struct proto_msg *m);
/* Send what is left of buf, from *off to len, on a non-blocking stream
 * socket, advancing *off: 1 when all of it went, 0 when the socket is full
 * (call again once it is writable), -1 when the peer is gone. */
int proto_send_pending(int fd, const uint8_t *buf, size_t len, size_t *off);

/* Incremental decoder for event loops: bytes go in as they arrive, whole
 * frames come out. A header is checked as soon as it is complete. */
struct proto_decoder {
	size_t have;
	size_t start; /* first unconsumed byte */
	uint8_t buf[PROTO_MAX_FRAME];
};

void proto_decoder_init(struct proto_decoder *d);
/* Room for more bytes: write up to the returned count at *p, then commit. */
size_t proto_decoder_space(struct proto_decoder *d, uint8_t **p);
void proto_decoder_commit(struct proto_decoder *d, size_t n);
/* Copy in what fits; how much was taken. */
size_t proto_decoder_push(struct proto_decoder *d, const void *data, size_t len);
/* One read() from fd into the free space: >0 bytes, 0 EOF, -1 errno. */
ssize_t proto_decoder_fill(struct proto_decoder *d, int fd);
/* 1: *m holds the next frame (its data stays valid until bytes are next
 * added: space, push or fill); 0: more bytes needed; -1: malformed, *why says how (the stream is
 * then useless). */
int proto_decoder_next(struct proto_decoder *d, struct proto_msg *m, const char **why);
/* Bytes buffered but not yet a whole frame. */
size_t proto_decoder_pending(const struct proto_decoder *d);

/* The shell's view of an exit: code, or 128 + signal. */
static inline int proto_exit_status(const struct proto_exit *e)
{
	return e->signaled ? 128 + (int)e->code : (int)e->code;
}

#endif
