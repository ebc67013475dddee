#!/bin/sh
# `make demo`: boot Gantry's microVM kernel with a small busybox userland and
# show what the guest sees. Runs in the nested KVM host when this machine has
# no usable /dev/kvm.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
# Under the build directory: the nested host sees the host tree, not its /tmp.
work=$(mktemp -d "$top/$build/demo.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

mkdir -p "$work/root/bin" "$work/root/dev" "$work/root/proc" "$work/root/sys"
cp /bin/busybox "$work/root/bin/busybox"
cat > "$work/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
echo
echo "Hello from a Gantry microVM."
echo "  kernel:  $(uname -sr)"
echo "  cpus:    $(cat /sys/devices/system/cpu/online)"
echo "  memory:  $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
echo "  uptime:  $(cut -d' ' -f1 /proc/uptime) s since the kernel started"
echo "  disks:   $(ls /sys/block | tr '\n' ' ')"
echo
reboot -f
INIT
chmod +x "$work/root/init"
(cd "$work/root" && find . | cpio -o -H newc --quiet) > "$work/demo.cpio"

"$top/tests/harness/kvmhost" -- "$top/$build/gantry" run \
	-kernel "$top/$build/kernel/vmlinux" -initrd "$work/demo.cpio" -cpus 1 -mem 256
