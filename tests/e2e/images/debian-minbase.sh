#!/bin/bash
# A real distribution image for the end-to-end tests: a Debian minbase root
# made with debootstrap, with the user `tester` (1000:1000), written as an OCI
# image layout (one gzip layer) whose config runs as that user. Beside minbase
# it holds the network clients the tests run as users do: curl and busybox
# (its wget and nc).
#
#   tests/e2e/images/debian-minbase.sh          # build unless cached; print its path
#   tests/e2e/images/debian-minbase.sh --path   # only print where it is (or would be)
#   tests/e2e/images/debian-minbase.sh --dev [--path]
#                  # the same with a developer's tools: git, python3 (venv, pip), nodejs,
#                  # xz and make, for bench/share's workloads
#   tests/e2e/images/debian-minbase.sh --deb-deps [--path]
#                  # the same with what gantry's .deb Depends on (scripts/deb.sh),
#                  # a clean root to install and purge the package in
#
# debootstrap takes minutes and needs root, so the layout is cached outside the
# tree, under ${XDG_CACHE_HOME:-~/.cache}/gantry/test-images/, in a directory
# named after a hash of this recipe (this file, suite, mirror), published by
# one rename. When it cannot be made here (not root, no debootstrap, the
# mirror out of reach), the reason is left in <dir>.unavailable and the
# script exits 0: the test reads it and says SKIP. Any other failure exits
# non-zero.
# DEBIAN_MIRROR and DEBIAN_SUITE override bookworm from deb.debian.org.
set -euo pipefail
export LC_ALL=C

suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/gantry/test-images
flavour=minbase
include=busybox,curl
if [ "${1:-}" = --dev ]; then
	flavour=dev
	include=$include,git,python3,python3-venv,python3-pip,nodejs,xz-utils,make
	shift
elif [ "${1:-}" = --deb-deps ]; then
	flavour=debdeps
	include=$include,libjansson4,libncursesw6,libtinfo6,libslirp0,libarchive13,libcurl4,libssl3,e2fsprogs
	shift
fi
key=$( (cat "${BASH_SOURCE[0]}"; echo "$suite $mirror $include") | sha256sum | cut -c1-16)
out=$cache/debian-$flavour-$suite-$key
unavailable=$out.unavailable

die() {
	echo "debian-minbase.sh: $*" >&2
	exit 1
}

# A reason to skip the test, not a failure.
unavailable() {
	mkdir -p "$cache"
	echo "$*" >"$unavailable"
	echo "debian-minbase.sh: $* (the test will skip)" >&2
	exit 0
}

if [ "${1:-}" = --path ]; then
	echo "$out"
	exit 0
fi
[ $# -eq 0 ] || die "usage: debian-minbase.sh [--dev | --deb-deps] [--path]"
if [ -f "$out/index.json" ]; then
	echo "$out"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || unavailable "debootstrap needs root"
command -v debootstrap >/dev/null || unavailable "debootstrap not found: apt-get install debootstrap"
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m)" ;;
esac

mkdir -p "$cache"
work=$(mktemp -d "$cache/.debian-minbase.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

if ! probe=$(python3 - "$mirror/dists/$suite/Release" 2>&1 <<'PY'
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=30).read(1)
PY
); then
	unavailable "cannot reach $mirror/dists/$suite/Release: $(echo "$probe" | tail -n 1)"
fi

echo "debian-minbase.sh: debootstrap --variant=minbase $suite from $mirror (minutes)" >&2
if ! debootstrap --variant=minbase --include="$include" --arch="$arch" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
	tail -n 20 "$work/debootstrap.log" >&2
	die "debootstrap failed (log above)"
fi
chroot "$root" /usr/sbin/groupadd -g 1000 tester
chroot "$root" /usr/sbin/useradd -m -u 1000 -g 1000 -s /bin/bash tester
# What a container image does not ship.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
find "$root/dev" "$root/proc" "$root/sys" "$root/run" -mindepth 1 -delete 2>/dev/null || true

tar --create --file="$work/layer.tar" --numeric-owner --sort=name --xattrs -C "$root" .
gzip -1n <"$work/layer.tar" >"$work/layer.tar.gz"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }
layout=$work/layout
mkdir -p "$layout/blobs/sha256"
put() {
	local d
	d=$(sha "$1")
	mv "$1" "$layout/blobs/sha256/$d"
	chmod 0644 "$layout/blobs/sha256/$d"
	echo "$d"
}

diff_id=$(sha "$work/layer.tar")
layer_size=$(size "$work/layer.tar.gz")
layer=$(put "$work/layer.tar.gz")
printf '%s' '{"architecture":"'"$arch"'","os":"linux",'\
'"config":{"User":"tester","Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],'\
'"Cmd":["/bin/bash"],"WorkingDir":"/home/tester"},'\
'"rootfs":{"type":"layers","diff_ids":["sha256:'"$diff_id"'"]},'\
'"history":[{"created_by":"debootstrap --variant=minbase --include='"$include $suite"'; useradd tester"}]}' >"$work/config.json"
config_size=$(size "$work/config.json")
config=$(put "$work/config.json")
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'\
'"config":{"mediaType":"application/vnd.oci.image.config.v1+json",'\
'"digest":"sha256:'"$config"'","size":'"$config_size"'},'\
'"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip",'\
'"digest":"sha256:'"$layer"'","size":'"$layer_size"'}]}' >"$work/manifest.json"
manifest_size=$(size "$work/manifest.json")
manifest=$(put "$work/manifest.json")
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",'\
'"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json",'\
'"digest":"sha256:'"$manifest"'","size":'"$manifest_size"','\
'"platform":{"architecture":"'"$arch"'","os":"linux"}}]}' >"$layout/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
chmod 0755 "$layout" "$layout/blobs" "$layout/blobs/sha256"

# Publish: one rename; a concurrent build that won keeps its copy.
mv -T "$layout" "$out" 2>/dev/null || [ -f "$out/index.json" ] || die "cannot publish $out"
rm -f "$unavailable"
echo "$out"
