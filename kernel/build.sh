#!/bin/bash
# Build the Gantry guest kernel (vmlinux + bzImage) from Debian's linux-source.
#
#   kernel/build.sh [OUTDIR]
#
# The result is cached outside the source tree, under
#   ${GANTRY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gantry}/kernel/<key>/
# where <key> is a sha256 over microvm.config, this script and the version of
# the linux-source package, so any change to one of them means a fresh build
# and an unchanged input never builds twice. A cache entry is published with
# one rename, so it is either complete or absent; concurrent invocations
# serialize on a lock file and the second one reuses the first one's result.
#
# With OUTDIR, vmlinux, bzImage and config are also placed there (hard links
# when possible). Messages go to stderr; the only line on stdout, printed
# last, is the cache directory.
#
# Everything runs from main(), called on the last line: bash reads a script
# as it goes, and the build takes minutes, during which the file may change.
set -euo pipefail

msg() { printf 'kernel: %s\n' "$*" >&2; }
die() { printf 'kernel/build.sh: %s\n' "$*" >&2; exit 1; }

artifacts=(vmlinux bzImage config)
work=
stage=

# The newest installed linux-source tarball (Debian installs one per
# linux-source-X.Y package; prefer the highest X.Y if several are present).
find_source_tarball() {
	local t
	t=$(find /usr/src -maxdepth 1 -name 'linux-source-*.tar.xz' 2>/dev/null | sort -V | tail -n 1)
	[ -n "$t" ] || die "no /usr/src/linux-source-*.tar.xz: install Debian's linux-source package (apt-get install linux-source)"
	printf '%s\n' "$t"
}

# Version of the package that owns the tarball; it goes into the cache key
# so that a linux-source update rebuilds. Without dpkg, fall back to the
# tarball's size and mtime, which change whenever the file does.
source_version() {
	local tarball=$1 pkg
	if command -v dpkg-query >/dev/null 2>&1 &&
		pkg=$(dpkg-query -S "$tarball" 2>/dev/null | head -n 1 | cut -d: -f1) &&
		[ -n "$pkg" ]; then
		printf '%s=%s\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg")"
	else
		stat -c 'file=%n size=%s mtime=%Y' "$tarball"
	fi
}

check_tools() {
	local missing=() t
	for t in make gcc ld flex bison bc perl xz tar flock; do
		command -v "$t" >/dev/null 2>&1 || missing+=("$t")
	done
	[ ${#missing[@]} -eq 0 ] ||
		die "missing build tools: ${missing[*]} (apt-get install build-essential flex bison bc libelf-dev libssl-dev xz-utils util-linux)"
}

entry_complete() {
	local f
	for f in "${artifacts[@]}"; do [ -s "$keydir/$f" ] || return 1; done
}

# Copy the artifacts to OUTDIR. Hard links save ~20 MB per copy; remove the
# destination first so that a fallback cp never writes through an old hard
# link into the cache.
export_to_outdir() {
	local f
	[ -n "$outdir" ] || return 0
	mkdir -p "$outdir"
	for f in "${artifacts[@]}"; do
		rm -f "$outdir/$f"
		ln "$keydir/$f" "$outdir/$f" 2>/dev/null || cp "$keydir/$f" "$outdir/$f"
	done
}

finish() {
	export_to_outdir
	printf '%s\n' "$keydir"
	exit 0
}

# Invoked from the EXIT trap.
# shellcheck disable=SC2317
cleanup() {
	# Only paths this run created; both live inside the cache root.
	[ -z "$work" ] || rm -rf -- "$work"
	[ -z "$stage" ] || rm -rf -- "$stage"
}

# Run a step with its output in the log; on failure show the tail and keep a
# copy of the log next to the cache (the work dir is deleted on exit).
run_logged() {
	if ! "$@" >>"$log" 2>&1; then
		printf 'kernel/build.sh: failed: %s\n' "$*" >&2
		tail -n 30 "$log" >&2
		cp "$log" "$cache_root/failed-build.log" 2>/dev/null &&
			printf 'kernel/build.sh: full log: %s\n' "$cache_root/failed-build.log" >&2
		exit 1
	fi
}

# Every value the fragment asks for must have survived olddefconfig; one that
# did not has an unmet dependency, and silently building without it would
# give a guest that fails much later and much less clearly.
verify_config() {
	local config=$1 bad=() line sym want got
	while IFS= read -r line; do
		if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
			sym=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
			got=$(grep -m1 -E "^(# )?${sym}[= ]" "$config" || true)
			[ "$got" = "$sym=$want" ] || bad+=("$sym: wanted $want, got ${got:-absent}")
		elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
			sym=${BASH_REMATCH[1]}
			got=$(grep -m1 -E "^${sym}=" "$config" || true)
			[ -z "$got" ] || bad+=("$sym: wanted not set, got $got")
		fi
	done <"$fragment"
	if [ ${#bad[@]} -gt 0 ]; then
		printf 'kernel/build.sh: %d option(s) of %s did not stick (missing dependency?):\n' \
			"${#bad[@]}" "$fragment" >&2
		printf '  %s\n' "${bad[@]}" >&2
		exit 1
	fi
}

build() {
	local src jobs start
	work=$(mktemp -d "$cache_root/.build.XXXXXX")
	log=$work/build.log

	tar -xJf "$tarball" -C "$work" || die "cannot extract $tarball"
	src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'linux-source-*' | head -n 1)
	[ -n "$src" ] || die "$tarball did not contain a linux-source-* directory"

	# Keep this machine's names out of the image (uname -v shows them).
	export KBUILD_BUILD_USER=gantry KBUILD_BUILD_HOST=gantry

	run_logged make -C "$src" tinyconfig
	run_logged env -C "$src" ./scripts/kconfig/merge_config.sh -m .config "$fragment"
	run_logged make -C "$src" olddefconfig
	verify_config "$src/.config"

	jobs=$(nproc 2>/dev/null || echo 2)
	msg "building $(basename "$src") ($srcver) with $jobs jobs; takes several minutes; log: $log"
	start=$(date +%s)
	run_logged make -C "$src" -j"$jobs" vmlinux bzImage
	msg "built in $(($(date +%s) - start)) s"

	# Publish: stage everything, then one rename makes the entry appear whole.
	stage=$(mktemp -d "$cache_root/.stage.XXXXXX")
	cp "$src/vmlinux" "$stage/vmlinux"
	cp "$src/arch/x86/boot/bzImage" "$stage/bzImage"
	cp "$src/.config" "$stage/config"
	chmod 755 "$stage"
	chmod 644 "$stage"/*
	mv -T "$stage" "$keydir"
	stage=
	# Let waiting invocations reuse the entry while the tree is deleted.
	exec 9>&-
	rm -rf -- "$work"
	work=
}

main() {
	local here self
	[ $# -le 1 ] || die "usage: kernel/build.sh [OUTDIR]"
	outdir=${1:-}
	here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
	fragment=$here/microvm.config
	self=$here/$(basename "${BASH_SOURCE[0]}")
	[ -r "$fragment" ] || die "missing $fragment"

	tarball=$(find_source_tarball)
	srcver=$(source_version "$tarball")
	key=$({ cat "$fragment" "$self"; printf '%s\n' "$srcver"; } | sha256sum | cut -c1-64)

	cache_root=${GANTRY_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/gantry}/kernel
	mkdir -p "$cache_root"
	cache_root=$(cd "$cache_root" && pwd)
	keydir=$cache_root/$key

	if entry_complete; then
		msg "reusing cached build $keydir"
		finish
	fi

	check_tools
	exec 9>"$cache_root/.lock"
	if ! flock -n 9; then
		msg "another kernel build holds $cache_root/.lock; waiting for it"
		flock 9
	fi
	# The other holder may just have built this very key.
	if entry_complete; then
		msg "reusing cached build $keydir"
		finish
	fi

	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	build
	finish
}

# One compound command, so that bash has read all it will run before it starts.
# shellcheck disable=SC2317
{ main "$@"; exit; }
