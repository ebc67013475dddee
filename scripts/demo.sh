#!/bin/sh
# `make demo`: Gantry's main job on the built-in busybox image. `gantry exec`
# boots a fresh microVM, runs the command in a container inside it, relays
# its output and returns its exit status. Runs in the nested KVM host when
# this machine has no usable /dev/kvm.
set -eu
build=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)

exec "$top/tests/harness/kvmhost" --smp 2 --retry-frozen 1 -- "$top/$build/gantry" exec -cpus 2 -mem 256 -- sh -c '
echo
echo "Hello from a container in a Gantry microVM."
echo "  kernel:  $(uname -sr)"
echo "  cpus:    $(cat /sys/devices/system/cpu/online)"
echo "  memory:  $(awk "/MemTotal/ {print \$2 \" kB\"}" /proc/meminfo)"
echo "  uptime:  $(cut -d" " -f1 /proc/uptime) s since the guest kernel started"
echo "  user:    $(id)"
echo "  image:   $(busybox | head -n 1)"
echo'
