#!/bin/sh
# Replay the committed seed corpora through each libFuzzer target, then fuzz
# each one for a short, bounded time. Exits non-zero on the first crash and
# leaves the crashing input where it says. New inputs go to a temporary
# directory, never into the committed corpus.
#
#   tests/fuzz/run-corpus.sh BUILD_DIR
#   FUZZ_TIME=120 tests/fuzz/run-corpus.sh BUILD_DIR    # fuzz longer
set -eu

build=${1:?usage: run-corpus.sh BUILD_DIR (configured with -Dfuzzing=true)}
here=$(cd "$(dirname "$0")" && pwd)
time=${FUZZ_TIME:-20}
runs=${FUZZ_RUNS:-5000000}
work=$(mktemp -d "${TMPDIR:-/tmp}/gantry-fuzz.XXXXXX")

fail() {
	echo "$1" >&2
	echo "logs and crashing inputs kept in $work" >&2
	exit 1
}

# target and the largest input it reads (its header plus RAM image or ops;
# vsock's and virtio_net's payloads beyond the input are a pattern;
# virtio_fs: a threads byte and ops, chain contents a pattern;
# image_json: documents; image_ref: a reference, registry name or platform;
# registry_auth: a response head or a WWW-Authenticate challenge;
# proto: a mode byte and the largest frame; layer: a tar, perhaps compressed;
# dns: a mode byte and a query, or a query and an upstream answer;
# net_frame: a mode byte and the largest Ethernet frame;
# net_policy: a policy document; net_judge: a policy and destinations, binary;
# fuse: FUSE requests, a few of them with long arguments or WRITE data;
# share_spec: a share spec, or a list of them one a line;
# guest_shares: one gantry.share= value, a long path's among them;
# untar: a tar stream as gantry cp reads one from a guest;
# share_rpc: a mode byte, then a RAM size and a request message, or an xattr value;
# secret_spec: a -secret spec, or a newline and a -secret-file dotenv;
# tls_hello: a ClientHello's bytes as the guest sends them;
# egress_http: a split seed byte and the guest's request stream;
# api: a method byte, a path, an Idempotency-Key line and a body;
# files: the file helper's records; state: a snapshot state file;
# oci_spec: an OCI bundle's config.json; mcp_frame: a chunk-size byte and
# the guest's MCP stream, messages up to a few KiB; mcp_spec: an
# -mcp-remote spec and a tool name; oauth: a providers file, or the head
# of a request to a login's callback).
specs="virtq:8200 mmio:6145 vsock:16384 virtio_net:16384 virtio_fs:4096 image_json:8192 image_ref:512
	registry_auth:4096 proto:65545 layer:65536 dns:8192 net_frame:65535
	net_policy:65536 net_judge:1024 fuse:16384 share_spec:16384 guest_shares:8192 untar:65536 share_rpc:4096
	secret_spec:8192 tls_hello:17000 egress_http:80000 api:65536 files:8192 state:65536 oci_spec:65536
	mcp_frame:65536 mcp_spec:8192 oauth:16384"

# Every target in the source is in the list: one left out would never run.
for src in "$here"/fuzz_*.c; do
	t=$(basename "$src" .c)
	t=${t#fuzz_}
	case " $(echo $specs) " in
	*" $t:"*) ;;
	*) fail "fuzz_$t: not in run-corpus.sh's list of targets" ;;
	esac
done

for spec in $specs; do
	t=${spec%%:*}
	max_len=${spec#*:}
	bin=$build/tests/fuzz/fuzz_$t
	corpus=$here/corpus/$t
	[ -x "$bin" ] || fail "fuzz_$t: not built in $build (meson setup with -Dfuzzing=true)"
	n=$(find "$corpus" -type f | wc -l)
	[ "$n" -gt 0 ] || fail "fuzz_$t: no seeds in $corpus"

	# Given files, libFuzzer runs each input once.
	if ! "$bin" -artifact_prefix="$work/$t-" "$corpus"/* >"$work/$t-replay.log" 2>&1; then
		tail -n 40 "$work/$t-replay.log" >&2
		fail "fuzz_$t: crash replaying the corpus"
	fi
	replayed=$(grep -c '^Executed ' "$work/$t-replay.log" || true)
	[ "$replayed" -eq "$n" ] || fail "fuzz_$t: replayed $replayed of $n inputs"

	mkdir "$work/$t-new"
	if ! "$bin" -max_total_time="$time" -runs="$runs" -max_len="$max_len" \
		-artifact_prefix="$work/$t-" -print_final_stats=1 \
		"$work/$t-new" "$corpus" >"$work/$t-fuzz.log" 2>&1; then
		tail -n 40 "$work/$t-fuzz.log" >&2
		fail "fuzz_$t: crash while fuzzing"
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t-fuzz.log")
	echo "fuzz_$t: replayed $replayed corpus inputs; fuzzed ${time}s, ${execs:-?} execs, no crash"
done
rm -rf "$work"
