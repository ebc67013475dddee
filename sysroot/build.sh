#!/bin/bash
# Build the guest's system root: the EROFS image the microVM boots from as
# /dev/vda (root=/dev/vda rootfstype=erofs ro init=/sbin/gantry-init).
#
#   sysroot/build.sh GANTRY_INIT OUT.erofs [CRUN]
#
# It holds /sbin/gantry-init (static), crun (Debian's /usr/bin/crun unless
# CRUN is given) with every library it links and its ELF interpreter, empty
# mount points and a minimal /etc/passwd and /etc/group. The image is
# reproducible (fixed timestamps, owners and UUID) and cached by content:
# when the inputs hash to what OUT.inputs records, OUT is left alone. OUT is
# replaced atomically. Needs mkfs.erofs (erofs-utils) and ldd.
set -euo pipefail

prog=sysroot/build.sh
die() { echo "$prog: $*" >&2; exit 1; }

[ $# -ge 2 ] && [ $# -le 3 ] || die "usage: $prog GANTRY_INIT OUT.erofs [CRUN]"
init=$1
out=$2
crun=${3:-/usr/bin/crun}
# Any fixed value does; this one makes the image recognisable.
uuid=67616e74-7279-5379-7352-6f6f74000001

[ -f "$init" ] || die "gantry-init \`$init\` not found (build it: ninja -C build)"
[ -x "$crun" ] || die "crun \`$crun\` not found (apt-get install crun)"
command -v mkfs.erofs >/dev/null || die "mkfs.erofs not found (apt-get install erofs-utils)"
if ldd "$init" >/dev/null 2>&1; then
	die "\`$init\` is dynamically linked; gantry-init must be static"
fi

# crun's shared libraries and its interpreter, as absolute paths. ldd prints
# "name => /path (addr)" for libraries and "/path (addr)" for the loader.
libs() {
	ldd "$crun" | awk '
		$2 == "=>" && $3 ~ /^\// { print $3; next }
		$1 ~ /^\// { print $1 }' | sort -u
}
# (A here-string, not <(...): /dev/fd may be missing, as in the test host.)
mapfile -t deps <<<"$(libs)"
[ -n "${deps[0]:-}" ] || die "ldd found no libraries for \`$crun\`"
for d in "${deps[@]}"; do
	[ -e "$d" ] || die "crun needs \`$d\`, which is missing"
done

# The cache key: this script, each input's content, mode and place in the
# image, and the mkfs.erofs that lays it out.
inputs() {
	sha256sum "$0" | cut -d' ' -f1
	printf 'sbin/gantry-init %s\n' "$(sha256sum <"$init" | cut -d' ' -f1)"
	printf 'usr/bin/crun %s\n' "$(sha256sum <"$crun" | cut -d' ' -f1)"
	for d in "${deps[@]}"; do
		printf '%s %s\n' "$d" "$(sha256sum <"$d" | cut -d' ' -f1)"
	done
	mkfs.erofs --help 2>&1 | sed -n 1p # sed reads it all: no SIGPIPE under pipefail
}
key=$(inputs | sha256sum | cut -d' ' -f1)
if [ -f "$out" ] && [ -f "$out.inputs" ] && [ "$(cat "$out.inputs")" = "$key" ]; then
	exit 0
fi

outdir=$(dirname -- "$out")
mkdir -p -- "$outdir"
stage=$(mktemp -d "$outdir/.sysroot-stage.XXXXXX")
tmp="$out.tmp.$$"
trap 'rm -rf -- "$stage" "$tmp"' EXIT

umask 022
for d in proc sys dev run tmp mnt etc sbin usr/bin; do
	mkdir -p "$stage/$d"
done
chmod 1777 "$stage/tmp"
install -m 0755 "$init" "$stage/sbin/gantry-init"
install -m 0755 "$crun" "$stage/usr/bin/crun"
# Each library at the path the loader will look for, symlinks resolved.
for d in "${deps[@]}"; do
	mkdir -p "$stage$(dirname -- "$d")"
	install -m 0755 "$(readlink -f -- "$d")" "$stage$d"
done
printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n' \
	>"$stage/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$stage/etc/group"
chmod 0644 "$stage/etc/passwd" "$stage/etc/group"

mkfs.erofs --quiet --all-root -T0 -U"$uuid" "$tmp" "$stage" >/dev/null ||
	die "mkfs.erofs failed"
mv -f -- "$tmp" "$out"
printf '%s\n' "$key" >"$out.inputs"
