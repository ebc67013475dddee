#!/bin/bash
# Build Gantry's default image as an OCI image layout in OUTDIR: Debian's
# static busybox with a symlink per applet (where `busybox --install` would
# put them), /etc/passwd and /etc/group with root and the user gantry (1000),
# /tmp, /root and /home/gantry. One gzip layer, written the same way every
# time (sorted names, owners and mtimes fixed, gzip without a name or time),
# so the same busybox gives the same bytes and the same digests.
#
#   images/default/build.sh OUTDIR
#   BUSYBOX=/path/to/static/busybox images/default/build.sh OUTDIR
set -euo pipefail
export LC_ALL=C

out=${1:?usage: build.sh OUTDIR}
busybox=${BUSYBOX:-/bin/busybox}

die() {
	echo "build.sh: $*" >&2
	exit 1
}

[ -x "$busybox" ] || die "no $busybox (install Debian's busybox-static)"
# A dynamic busybox would need libraries the image does not have.
if ldd "$busybox" >/dev/null 2>&1; then
	die "$busybox is not statically linked (install busybox-static)"
fi
case $(uname -m) in
x86_64) arch=amd64 ;;
aarch64) arch=arm64 ;;
*) die "unsupported architecture $(uname -m)" ;;
esac

work=$(mktemp -d "${TMPDIR:-/tmp}/gantry-default-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
umask 022

mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,sys,run,tmp,var/tmp,root,home/gantry}
install -m 0755 "$busybox" "$root/bin/busybox"
"$busybox" --list-full | while read -r applet; do
	case $applet in
	bin/busybox | linuxrc) continue ;;
	esac
	[ -e "$root/$applet" ] || ln -s /bin/busybox "$root/$applet"
done
[ -L "$root/bin/sh" ] || die "$busybox has no sh applet"

cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
gantry:x:1000:1000:gantry:/home/gantry:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
cat >"$root/etc/group" <<'EOF'
root:x:0:
gantry:x:1000:
nogroup:x:65534:
EOF
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1	localhost ip6-localhost ip6-loopback
EOF
chmod 0644 "$root"/etc/{passwd,group,hosts}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"

# Everything but /home/gantry belongs to root; that one to gantry.
tarflags=(--format=gnu --numeric-owner --mtime=@0 --no-recursion -C "$root")
(cd "$root" && find . -mindepth 1 ! -path ./home/gantry | sed 's|^\./||' | sort) >"$work/list"
tar -cf "$work/layer.tar" "${tarflags[@]}" --owner=0 --group=0 -T "$work/list"
tar -rf "$work/layer.tar" "${tarflags[@]}" --owner=1000 --group=1000 home/gantry
gzip -9n <"$work/layer.tar" >"$work/layer.tar.gz"

sha() { sha256sum "$1" | cut -d' ' -f1; }
size() { stat -c %s "$1"; }

rm -rf "$out"
mkdir -p "$out/blobs/sha256"

# put FILE: store it as a blob, print its digest
put() {
	local d
	d=$(sha "$1")
	cp "$1" "$out/blobs/sha256/$d"
	chmod 0644 "$out/blobs/sha256/$d"
	echo "$d"
}

diff_id=$(sha "$work/layer.tar")
layer=$(put "$work/layer.tar.gz")
layer_size=$(size "$work/layer.tar.gz")

printf '%s' '{"architecture":"'"$arch"'","os":"linux",'\
'"config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],'\
'"Cmd":["/bin/sh"],"WorkingDir":"/"},'\
'"rootfs":{"type":"layers","diff_ids":["sha256:'"$diff_id"'"]},'\
'"history":[{"created_by":"gantry images/default/build.sh"}]}' >"$work/config.json"
config=$(put "$work/config.json")
config_size=$(size "$work/config.json")

printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",'\
'"config":{"mediaType":"application/vnd.oci.image.config.v1+json",'\
'"digest":"sha256:'"$config"'","size":'"$config_size"'},'\
'"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip",'\
'"digest":"sha256:'"$layer"'","size":'"$layer_size"'}]}' >"$work/manifest.json"
manifest=$(put "$work/manifest.json")
manifest_size=$(size "$work/manifest.json")

printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json",'\
'"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json",'\
'"digest":"sha256:'"$manifest"'","size":'"$manifest_size"','\
'"platform":{"architecture":"'"$arch"'","os":"linux"},'\
'"annotations":{"org.opencontainers.image.ref.name":"latest"}}]}' >"$out/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$out/oci-layout"
chmod 0644 "$out/index.json" "$out/oci-layout"
echo "sha256:$manifest"
