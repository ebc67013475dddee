#!/bin/sh
# `make deb`: a Debian package of gantry and its guest assets, installed
# under /usr (scripts/install.sh), built with dpkg-deb into
# BUILD/gantry_VERSION_ARCH.deb. The libraries gantry loads when it first
# needs them (libslirp, libarchive, libcurl, libcrypto) are Depends, as is
# mke2fs, which makes a sandbox's disk; libhttp-parser (the egress worker's,
# for injected secrets alone), libmicrohttpd (`gantry serve`'s) and the CA
# bundle are Recommends.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)

version=$("$build/gantry" version | awk '{ print $2; exit }')
arch=$(dpkg --print-architecture)
stage=$build/deb
rm -rf "$stage"
sh "$top/scripts/install.sh" "$build" "$stage/usr" >/dev/null
install -d -m 0755 "$stage/DEBIAN" "$stage/usr/share/doc/gantry"
install -m 0644 "$top/README.md" "$stage/usr/share/doc/gantry/README.md"
printf 'Gantry\nLicense: Apache-2.0\n See /usr/share/common-licenses/Apache-2.0.\n' \
	>"$stage/usr/share/doc/gantry/copyright"
size=$(du -sk "$stage/usr" | cut -f1)
cat >"$stage/DEBIAN/control" <<EOF
Package: gantry
Version: $version
Architecture: $arch
Maintainer: Gantry developers
Installed-Size: $size
Depends: libc6 (>= 2.36), libjansson4, libncursesw6, libtinfo6, libslirp0 (>= 4.7), libarchive13, libcurl4, libssl3, e2fsprogs
Recommends: ca-certificates, libhttp-parser2.9, libmicrohttpd12
Section: admin
Priority: optional
Description: run OCI images in lightweight Linux microVMs
 Gantry runs container images in microVMs on KVM, with its own VMM: a
 real VM boundary for untrusted code and coding agents, started as fast
 as a container. One-shot `gantry exec IMAGE -- CMD`, persistent
 sandboxes, an egress policy, published ports and host shares.
EOF
out=$build/gantry_${version}_${arch}.deb
dpkg-deb --root-owner-group -Zxz --build "$stage" "$out" >/dev/null
echo "$out"
