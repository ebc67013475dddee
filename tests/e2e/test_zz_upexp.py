import socket, threading, time, os
import pytest
import netrig
from test_net import rig, world_http, g, NAME  # noqa
pytestmark = pytest.mark.kvm
LOG = []
class Sink(netrig.Server):
    def _serve_once(self):
        c, _ = self.sock.accept()
        threading.Thread(target=self.one, args=(c,), daemon=True).start()
    def one(self, c):
        t0 = time.monotonic(); n = 0
        with c:
            while (d := c.recv(1 << 20)):
                n += len(d)
        LOG.append((n, time.monotonic() - t0))
def test_upload_exp(g, rig, world_http, tmp_path_factory):
    rig.serve(Sink, "W", "0.0.0.0", 9400)
    d = world_http
    print("world_http", d)
    def sh(cmd, t=600):
        r = g.sh(cmd, timeout=t)
        print("$", cmd, "\n", r.stdout.decode()[-3000:], r.stderr.decode()[-2000:], flush=True)
    sh("cat /proc/net/snmp | grep Tcp; cat /proc/net/netstat | head -2 | cut -c1-2000")
    for cmd in ["head -c 8388608 /dev/zero | nc 203.0.113.10 9400",
                "dd if=/dev/zero bs=65536 count=128 2>/dev/null | nc 203.0.113.10 9400",
                "head -c 8388608 /dev/zero > /tmp/z; nc 203.0.113.10 9400 < /tmp/z"]:
        t = time.monotonic()
        sh(f"time sh -c '{cmd}'")
        time.sleep(1)
        print("host side:", LOG[-1] if LOG else None, "wall", time.monotonic() - t, flush=True)
    sh("cat /proc/net/snmp | grep Tcp; cat /proc/net/netstat | head -2 | cut -c1-2000")
    sh("cat /proc/sys/net/ipv4/tcp_wmem /proc/sys/net/core/wmem_default; ls /sys/module/virtio_net/parameters/ 2>/dev/null; cat /sys/module/virtio_net/parameters/* 2>/dev/null; ethtool -k eth0 2>/dev/null | head; cat /sys/class/net/eth0/mtu")
