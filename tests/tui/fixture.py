"""The dashboard's fixture GANTRY_HOME: hand-written state files of three
stopped sandboxes (one crashed, one with escape sequences in its image
name) with traffic, a policy, shares, ports, secrets, audit events and a
console log, for tests/e2e/test_tui.py and scripts/tui-pictures."""

import json
from pathlib import Path

NOW = 1796212800  # 2026-12-01T12:00:00Z: the clock ages count from (GANTRY_TUI_NOW)
ESC = "\x1b[2J\x1b]0;owned\x07"


def write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def sandbox(name, **kw):
    sb = {"name": name, "image": "debian:12", "image_path": "/images/x.erofs",
          "state": "stopped", "created": "2026-11-30T12:00:00Z", "cpus": 1, "mem_mib": 512,
          "disk_mib": 4096, "writable": True, "rwlayer": f"/layers/{name}.ext4",
          "rwlayer_managed": True, "net": True, "ports": [], "shares": [],
          "process_isolation": "auto"}
    sb.update(kw)
    return sb


def make_home(h):
    h = Path(h)
    sb = h / "sandboxes"
    write(sb / "web" / "sandbox.json", sandbox(
        "web", image="python:3.12", cpus=2, mem_mib=1024,
        ports=["127.0.0.1:8080:80", "0.0.0.0:5353:53/udp"],
        shares=["data=/srv/data@/data,ro", "src=/home/u/src@/workspace"],
        secrets=["API_KEY", "GH_TOKEN@github.com"],
        net_policy={"default": "deny", "allowLocal": False,
                    "rules": [{"action": "allow", "cidr": "203.0.113.0/24", "proto": "tcp",
                               "ports": "443"}],
                    "allowDomains": ["pypi.org"], "resolveDomains": []}))
    write(sb / "web" / "network-traffic.json", {
        "destinations": [
            {"addr": "203.0.113.7", "proto": "tcp", "port": 443, "verdict": "allowed",
             "reason": "", "tx_bytes": 2048, "rx_bytes": 5 << 20, "tx_packets": 9,
             "rx_packets": 40, "first_seen": "2026-12-01T11:00:00Z",
             "last_seen": "2026-12-01T11:59:00Z"},
            {"addr": "198.51.100.9", "proto": "tcp", "port": 80, "verdict": "dropped",
             "reason": "policy", "policy": "denied" + ESC, "tx_bytes": 60, "rx_bytes": 0,
             "tx_packets": 1, "rx_packets": 0, "first_seen": "2026-12-01T11:58:00Z",
             "last_seen": "2026-12-01T11:58:00Z"}],
        "dns": [{"name": "evil" + ESC + ".test", "qtype": "A", "verdict": "dropped",
                 "count": 3, "last_seen": "2026-12-01T11:58:00Z"}],
        "drops": {}, "evicted": 0, "totals": {}, "updated": "2026-12-01T11:59:00Z"})
    write(sb / "web" / "audit.json", {"events": [
        {"time": "2026-12-01T11:30:00Z", "kind": "deliver", "decision": "allow",
         "secret": "API_KEY", "reason": "to a session"},
        {"time": "2026-12-01T11:31:00Z", "kind": "broker", "decision": "deny",
         "secret": "GH_TOKEN", "host": "evil.example"}]})
    (sb / "web" / "console.log").write_text("booted\nthe guest says " + ESC + "\n")
    write(sb / "ci" / "sandbox.json", sandbox(
        "ci", state="crashed", reason="the guest's kernel panicked", net=False,
        created="2026-11-01T12:00:00Z", process_isolation="off"))
    write(sb / "odd" / "sandbox.json", sandbox("odd", image="img" + ESC + "end"))
    return h
