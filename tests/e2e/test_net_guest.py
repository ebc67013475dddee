"""The guest side of networking, as a container sees it (needs KVM and the
assets from `make assets`): gantry-init brings lo up in every guest and, with
the network on (the default), eth0 up at 192.168.127.2/24 with the device's
MTU and a default route via 192.168.127.1; the container's /etc/resolv.conf,
/etc/hosts and /etc/hostname are generated and read-only. With -net=false
there is no eth0, but lo works.

Traffic through the network worker (NAT, DNS, published ports) is
test_net.py's; these rows only read what the guest was given.
"""

import ipaddress
import os
import shutil
import socket
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import boot_timeout, build_dir

pytestmark = pytest.mark.kvm

GUEST = "192.168.127.2"
GATEWAY = "192.168.127.1"
MTU = 65520
RESOLV = "nameserver 192.168.127.1\noptions edns0\n"
IFF_UP = 0x1
RTF_GATEWAY = 0x2


def hosts_for(hostname):
    return (
        "127.0.0.1\tlocalhost\n"
        f"{GUEST}\t{hostname}\n"
        "192.168.127.254\thost.gantry.internal host.docker.internal host.containers.internal\n"
        f"{GATEWAY}\tgateway.gantry.internal\n"
    )


@pytest.fixture(scope="module")
def assets():
    assets = build_dir() / "assets"
    for name in ("vmlinux", "sysroot.erofs", "default-image"):
        if not (assets / name).exists():
            pytest.skip(f"guest asset {assets / name} missing: run `make assets`")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    return tmp_path_factory.mktemp("images")


@pytest.fixture
def sh(gantry, assets, images):
    """One-shot `gantry exec [flags] -- sh -c SCRIPT` on the built-in image."""
    env = dict(os.environ, GANTRY_IMAGES=str(images))

    def _sh(script, flags=()):
        return subprocess.run(
            [str(gantry), "exec", *flags, "--", "sh", "-c", script],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=boot_timeout() * 2,
        )

    return _sh


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr.decode(errors="replace"))
    return r.stdout.decode()


def routes(text):
    """/proc/net/route as (iface, destination, gateway, mask, flags) with
    addresses dotted: the kernel prints each __be32 as a host-order hex."""

    def addr(h):
        return socket.inet_ntoa(struct.pack("<I", int(h, 16)))

    rows = []
    for line in text.splitlines()[1:]:
        f = line.split()
        rows.append((f[0], addr(f[1]), addr(f[2]), addr(f[7]), int(f[3], 16)))
    return rows


# Every file one exec prints, each after a marker line.
SHOW = (
    "for f in /sys/class/net/eth0/mtu /sys/class/net/lo/flags /proc/net/route "
    "/etc/resolv.conf /etc/hosts /etc/hostname; do echo \"== $f\"; cat $f; done; "
    "echo \"== hostname\"; hostname; echo \"== ls\"; ls /sys/class/net"
)


def sections(out):
    parts, name = {}, None
    for line in out.splitlines(keepends=True):
        if line.startswith("== "):
            name = line[3:].strip()
            parts[name] = ""
        elif name is not None:
            parts[name] += line
    return parts


def test_networked_guest_settings(sh):
    s = sections(ok(sh(SHOW)))
    assert s["/sys/class/net/eth0/mtu"] == f"{MTU}\n"
    assert int(s["/sys/class/net/lo/flags"], 16) & IFF_UP
    assert s["ls"].split() == ["eth0", "lo"]
    table = routes(s["/proc/net/route"])
    default = [r for r in table if r[1] == "0.0.0.0" and r[3] == "0.0.0.0"]
    assert len(default) == 1, table
    assert default[0][0] == "eth0" and default[0][2] == GATEWAY, table
    assert default[0][4] & RTF_GATEWAY, table
    subnet = ipaddress.ip_network(f"{GUEST}/24", strict=False)
    assert ("eth0", str(subnet.network_address), "0.0.0.0", str(subnet.netmask)) in [
        r[:4] for r in table
    ], table
    assert s["/etc/resolv.conf"] == RESOLV
    # A one-shot exec's hostname is gantry's default.
    assert s["/etc/hosts"] == hosts_for("gantry")
    assert s["/etc/hostname"] == "gantry\n"
    assert s["hostname"] == "gantry\n"


def test_eth0_address(sh):
    out = ok(sh("ip -4 addr show dev eth0"))
    assert f"inet {GUEST}/24 " in out, out
    assert "UP" in out.splitlines()[0], out


def test_generated_files_are_read_only(sh):
    # Root in the container, with a writable root, still cannot change them.
    script = (
        "for f in resolv.conf hosts hostname; do "
        "if echo x >> /etc/$f; then echo \"wrote $f\"; fi; "
        "if rm -f /etc/$f; then echo \"removed $f\"; fi; done; cat /etc/resolv.conf"
    )
    r = sh(script)
    out = r.stdout.decode()
    assert "wrote" not in out and "removed" not in out, out
    assert out.endswith(RESOLV), out


def test_net_false_has_only_lo(sh):
    s = sections(ok(sh(SHOW + "; true", flags=("-net=false",))))
    assert s["ls"].split() == ["lo"]
    assert "/sys/class/net/eth0/mtu" in s and s["/sys/class/net/eth0/mtu"] == ""
    assert int(s["/sys/class/net/lo/flags"], 16) & IFF_UP
    # No default route, nothing but what lo brings.
    assert not [r for r in routes(s["/proc/net/route"]) if r[1] == "0.0.0.0"]
    assert s["/etc/resolv.conf"] == ""
    assert s["/etc/hosts"] == "127.0.0.1\tlocalhost gantry\n"
    assert s["/etc/hostname"] == "gantry\n"


def test_net_false_loopback_serves(sh):
    # busybox httpd listens before it daemonizes; wget reaches it over lo.
    script = (
        "mkdir -p /tmp/www && echo served-over-lo > /tmp/www/index.html && "
        "httpd -p 127.0.0.1:8080 -h /tmp/www && "
        "wget -q -T 10 -O - http://127.0.0.1:8080/"
    )
    assert ok(sh(script, flags=("-net=false",))) == "served-over-lo\n"


def test_loopback_serves_when_networked(sh):
    script = (
        "mkdir -p /tmp/www && echo lo-too > /tmp/www/index.html && "
        "httpd -p 127.0.0.1:8081 -h /tmp/www && wget -q -T 10 -O - http://127.0.0.1:8081/"
    )
    assert ok(sh(script)) == "lo-too\n"


class Sandboxes:
    def __init__(self, binary, home, images):
        self.binary = str(binary)
        self.env = dict(os.environ, GANTRY_HOME=str(home), GANTRY_IMAGES=str(images))
        self.names = []

    def run(self, *args, check=True):
        r = subprocess.run(
            [self.binary, *map(str, args)],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=boot_timeout() * 2,
        )
        if check:
            ok(r)
        return r

    def start(self, name, *flags):
        self.names.append(name)
        self.run("start", name, *flags)

    def sh(self, name, script):
        return self.run("exec", name, "--", "sh", "-c", script, check=False)

    def cleanup(self):
        for name in self.names:
            self.run("delete", name, check=False)


@pytest.fixture
def sandboxes(gantry, assets, images, tmp_path):
    if shutil.which("mke2fs") is None and not Path("/usr/sbin/mke2fs").exists():
        pytest.skip("mke2fs not found: apt-get install e2fsprogs")
    sb = Sandboxes(gantry, tmp_path / "home", images)
    yield sb
    sb.cleanup()


@pytest.mark.parametrize("flags", [(), ("-rw=false",)], ids=["writable", "read-only"])
def test_sandbox_hostname_is_its_name(sandboxes, flags):
    # A persistent sandbox is named after itself, in /etc/hosts too; with
    # -rw=false the root is read-only and the mountpoints still exist.
    name = "netbox-ro" if flags else "netbox"
    sandboxes.start(name, *flags)
    s = sections(ok(sandboxes.sh(name, SHOW)))
    assert s["/etc/hostname"] == f"{name}\n"
    assert s["hostname"] == f"{name}\n"
    assert s["/etc/hosts"] == hosts_for(name)
    assert s["/etc/resolv.conf"] == RESOLV
    assert s["/sys/class/net/eth0/mtu"] == f"{MTU}\n"


def test_sandbox_net_false(sandboxes):
    sandboxes.start("offline", "-net=false")
    s = sections(ok(sandboxes.sh("offline", SHOW + "; true")))
    assert s["ls"].split() == ["lo"]
    assert s["/etc/resolv.conf"] == ""
    assert s["/etc/hosts"] == "127.0.0.1\tlocalhost offline\n"
    assert s["/etc/hostname"] == "offline\n"
