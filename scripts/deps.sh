#!/bin/sh
# Install the Debian packages Gantry builds, tests and boots with.
# Idempotent: only missing packages are installed; nothing is downloaded
# from anywhere but the configured Debian mirrors.
set -eu

PKGS="
meson ninja-build gcc make pkg-config clang libclang-rt-14-dev
libcmocka-dev python3 python3-pytest python3-jsonschema python3-yaml
linux-source bc flex bison libelf-dev libssl-dev xz-utils
qemu-system-x86 linux-image-amd64 busybox-static cpio kmod
erofs-utils e2fsprogs crun
libarchive-dev libjansson-dev zstd libncurses-dev ncurses-base
umoci tmux debootstrap git procps zsh groff-base
libslirp-dev libhttp-parser-dev libmicrohttpd-dev libseccomp-dev dnsmasq-base iperf3 slirp4netns nftables dnsutils iproute2 curl
docker-registry skopeo apache2-utils libcurl4-openssl-dev nodejs
podman containerd
"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
		missing="$missing $p"
	fi
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "gantry: missing Debian packages:$missing (run as root to install them)" >&2
	exit 1
fi

echo "gantry: installing Debian packages:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
# shellcheck disable=SC2086
apt-get install -y -q --no-install-recommends $missing >/dev/null
