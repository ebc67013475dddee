#!/usr/bin/env python3
"""Write the seed corpora for the libFuzzer targets (standard library only).

    tests/fuzz/mkcorpus.py [OUT_DIR]    # default: corpus/ next to this file

The layouts mirror the headers of fuzz_virtq.c, fuzz_mmio.c, fuzz_virtio_net.c and
fuzz_virtio_fs.c: change them together. fuzz_layer's seeds are tars (python's tarfile, fixed owners
and mtimes); fuzz_registry_auth's are response heads and challenges; fuzz_dns's are guest
queries and (query, upstream answer) pairs, as fuzz_dns.c reads them; fuzz_net_policy's are
policy documents and fuzz_net_judge's binary policies and destinations, as its header lays them out;
fuzz_fuse's are request sequences in the layout fuzz_fuse.c's header gives; fuzz_share_spec's are
share specs, one or a list. Output is deterministic, so rerunning rewrites the same files.
"""
import base64
import gzip
import io
import os
import struct
import sys
import tarfile

# virtio 1.x split ring and virtio-mmio constants (uapi headers).
F_NEXT, F_WRITE, F_INDIRECT = 1, 2, 4
MMIO = {
    "magic": 0x000, "version": 0x004, "device_id": 0x008, "vendor": 0x00c,
    "dev_features": 0x010, "dev_features_sel": 0x014,
    "drv_features": 0x020, "drv_features_sel": 0x024,
    "queue_sel": 0x030, "queue_num_max": 0x034, "queue_num": 0x038,
    "queue_ready": 0x044, "queue_notify": 0x050,
    "isr": 0x060, "isr_ack": 0x064, "status": 0x070,
    "desc_lo": 0x080, "desc_hi": 0x084, "avail_lo": 0x090, "avail_hi": 0x094,
    "used_lo": 0x0a0, "used_hi": 0x0a4, "config": 0x100,
}
S_ACK, S_DRIVER, S_FEATURES_OK, S_DRIVER_OK = 1, 2, 8, 4
BLK_T_IN, BLK_T_OUT, BLK_T_FLUSH, BLK_T_GET_ID = 0, 1, 4, 8


def desc(addr, length, flags=0, nxt=0):
    return struct.pack("<QIHH", addr, length, flags, nxt)


# ---- fuzz_virtq: 8-byte header, then RAM from gpa 0 ----------------------
V_AVAIL, V_DESC = 0x0000, 0x0400
V_FEED, V_MISALIGN, V_REUSE, V_EVENT_IDX = 1, 2, 4, 8


def virtq_input(log2num, descs, ring, avail_idx, start=0, flags=0,
                misalign=0, roff=0, wlen=16, avail_flags=0, raw_size=None):
    num = 1 << log2num
    sel = (0x80 | raw_size) if raw_size is not None else log2num
    hdr = struct.pack("<BHBBHB", sel, start, flags, misalign, roff, wlen)
    ram = bytearray(V_DESC + 16 * max(num, len(descs)))
    # Something recognisable in the data area, before the rings go in.
    for i in range(0x100, 0x300):
        ram[i] = i & 0xff
    struct.pack_into("<HH", ram, V_AVAIL, avail_flags, avail_idx & 0xffff)
    for slot, head in ring.items():
        struct.pack_into("<H", ram, V_AVAIL + 4 + 2 * (slot % num), head)
    for i, d in descs.items():
        ram[V_DESC + 16 * i:V_DESC + 16 * i + 16] = d
    return hdr + bytes(ram)


def virtq_seeds():
    s = {}
    s["empty"] = virtq_input(4, {}, {}, 0)
    s["single"] = virtq_input(3, {0: desc(0x100, 32)}, {0: 0}, 1)
    s["chain-out-in"] = virtq_input(4, {
        2: desc(0x100, 16, F_NEXT, 5),
        5: desc(0x180, 64, F_NEXT | F_WRITE, 7),
        7: desc(0x1c0, 1, F_WRITE),
    }, {0: 2}, 1, roff=8, wlen=70)
    s["three-reuse"] = virtq_input(3, {
        0: desc(0x100, 8), 1: desc(0x200, 8, F_WRITE), 4: desc(0x110, 8, F_NEXT, 1),
    }, {0: 0, 1: 4, 2: 1}, 3, flags=V_REUSE)
    s["loop"] = virtq_input(3, {
        0: desc(0x100, 8, F_NEXT, 1), 1: desc(0x100, 8, F_NEXT, 0), 2: desc(0x100, 8),
    }, {0: 0, 1: 2}, 2)
    s["self-loop"] = virtq_input(3, {3: desc(0x100, 8, F_NEXT, 3)}, {0: 3}, 1)
    s["indirect"] = virtq_input(3, {0: desc(0x100, 32, F_INDIRECT)}, {0: 0}, 1)
    s["next-oob"] = virtq_input(3, {0: desc(0x100, 8, F_NEXT, 8)}, {0: 0}, 1)
    s["head-oob"] = virtq_input(3, {0: desc(0x100, 8)}, {0: 9, 1: 0}, 2)
    s["avail-jump"] = virtq_input(3, {0: desc(0x100, 8)}, {}, 13)
    s["wrap"] = virtq_input(3, {0: desc(0x100, 8), 1: desc(0x108, 8, F_WRITE)},
                            {65534: 0, 65535: 1, 0: 0}, 1, start=65534)
    s["read-after-write"] = virtq_input(3, {
        0: desc(0x100, 8, F_WRITE | F_NEXT, 1), 1: desc(0x108, 8),
    }, {0: 0}, 1)
    s["ram-edges"] = virtq_input(3, {
        0: desc(0x1ff0, 0x20), 1: desc(0xfffffffffffffff0, 0x20, F_WRITE),
        2: desc(0x1ff0, 0x10, F_WRITE), 3: desc(0x100, 0),
    }, {0: 0, 1: 1, 2: 2, 3: 3}, 4)
    s["feed"] = virtq_input(2, {0: desc(0x100, 8, F_NEXT, 1), 1: desc(0x200, 4, F_WRITE)},
                            {0: 0, 1: 0, 2: 0, 3: 0}, 1, flags=V_FEED, wlen=3)
    s["misaligned"] = virtq_input(3, {0: desc(0x100, 8)}, {0: 0}, 1,
                                  flags=V_MISALIGN, misalign=0x08)
    s["event-idx"] = virtq_input(3, {0: desc(0x100, 8), 1: desc(0x108, 8, F_WRITE)},
                                 {0: 0, 1: 1}, 2, flags=V_EVENT_IDX)
    s["event-idx-feed-reuse"] = virtq_input(2, {0: desc(0x100, 8, F_NEXT, 1),
                                                1: desc(0x200, 4, F_WRITE)},
                                            {0: 0, 1: 0, 2: 0, 3: 0}, 1,
                                            flags=V_EVENT_IDX | V_FEED | V_REUSE, start=65535)
    s["bad-size"] = virtq_input(3, {0: desc(0x100, 8)}, {0: 0}, 1, raw_size=3)
    long_chain = {i: desc(0x100 + i, 1, F_NEXT, i + 1) for i in range(129)}
    long_chain[129] = desc(0x100, 1)
    s["chain-129"] = virtq_input(8, long_chain, {0: 0, 1: 1}, 2)
    return s


# ---- fuzz_mmio: flags byte, then 12-byte ops ------------------------------
OP_READ, OP_WRITE, OP_RAM, OP_NOTIFY, OP_UP = 0, 1, 2, 3, 4
BLK, RNG, BALLOON = 0, 1, 2
M_DESC, M_AVAIL, M_USED, RNG_BASE, BALLOON_BASE = 0x0000, 0x1000, 0x2000, 0x8000, 0xc000
RING_BASE = {BLK: 0, RNG: RNG_BASE, BALLOON: BALLOON_BASE}


class Ops:
    def __init__(self, flags=0):
        self.out = bytearray([flags])

    def op(self, kind, dev, size, off, val):
        self.out += struct.pack("<BBHQ", kind | dev << 4, size, off, val)
        return self

    def rd(self, dev, reg, width=4):
        return self.op(OP_READ, dev, width.bit_length() - 1, MMIO.get(reg, reg), 0)

    def wr(self, dev, reg, val, width=4):
        return self.op(OP_WRITE, dev, width.bit_length() - 1, MMIO.get(reg, reg), val)

    def ram(self, gpa, data):
        for i in range(0, len(data), 8):
            chunk = data[i:i + 8]
            val = int.from_bytes(chunk.ljust(8, b"\0"), "little")
            self.op(OP_RAM, 0, len(chunk) - 1, gpa + i, val)
        return self

    def up(self, dev, log2num, q=0):
        return self.op(OP_UP, dev, log2num, q, 0)

    def notify(self, dev, q=0, ioeventfd=False):
        return self.op(OP_NOTIFY, dev, 1 if ioeventfd else 0, 0, q)

    def offer(self, dev, slot, head):
        base = RING_BASE[dev]
        self.ram(base + M_AVAIL + 4 + 2 * slot, struct.pack("<H", head))
        return self.ram(base + M_AVAIL + 2, struct.pack("<H", slot + 1))

    def blk_req(self, slot, head, rtype, sector, data_len, data_in, gpa):
        """Header at gpa, data at gpa + 0x100, status at gpa + 0x80."""
        self.ram(gpa, struct.pack("<IIQ", rtype, 0, sector))
        descs = [desc(gpa, 16, F_NEXT, head + 1)]
        if data_len:
            descs.append(desc(gpa + 0x100, data_len,
                              F_NEXT | (F_WRITE if data_in else 0), head + 2))
        descs.append(desc(gpa + 0x80, 1, F_WRITE))
        for i, d in enumerate(descs):
            self.ram(M_DESC + 16 * (head + i), d)
        return self.offer(BLK, slot, head)

    def bytes(self):
        return bytes(self.out)


def mmio_seeds():
    s = {}
    probe = Ops()
    for dev in (BLK, RNG):
        for reg in ("magic", "version", "device_id", "vendor", "queue_num_max", "status"):
            probe.rd(dev, reg)
        probe.rd(dev, "config", 8).rd(dev, 0x108, 4).rd(dev, 0x13c, 4).rd(dev, 0x1, 4)
        probe.rd(dev, "magic", 2).rd(dev, "magic", 8)
    s["probe"] = probe.bytes()

    # A driver bringing up virtio-blk register by register, then reading.
    manual = Ops()
    manual.wr(BLK, "status", S_ACK).wr(BLK, "status", S_ACK | S_DRIVER)
    manual.wr(BLK, "dev_features_sel", 1).rd(BLK, "dev_features")
    manual.wr(BLK, "drv_features_sel", 1).wr(BLK, "drv_features", 1)
    manual.wr(BLK, "status", S_ACK | S_DRIVER | S_FEATURES_OK).rd(BLK, "status")
    manual.wr(BLK, "queue_sel", 0).wr(BLK, "queue_num", 8)
    manual.wr(BLK, "desc_lo", M_DESC).wr(BLK, "avail_lo", M_AVAIL).wr(BLK, "used_lo", M_USED)
    manual.wr(BLK, "queue_ready", 1).rd(BLK, "queue_ready")
    manual.wr(BLK, "status", S_ACK | S_DRIVER | S_FEATURES_OK | S_DRIVER_OK)
    manual.blk_req(0, 0, BLK_T_IN, 1, 512, True, 0x3000).notify(BLK)
    manual.rd(BLK, "isr").wr(BLK, "isr_ack", 1)
    s["blk-manual-in"] = manual.bytes()

    s["blk-in"] = Ops().up(BLK, 4).blk_req(0, 0, BLK_T_IN, 2, 1024, True, 0x3000) \
        .notify(BLK).bytes()
    s["blk-out"] = Ops().up(BLK, 4).ram(0x3100, b"\xc3" * 64) \
        .blk_req(0, 0, BLK_T_OUT, 3, 512, False, 0x3000).notify(BLK).bytes()
    s["blk-out-ro"] = Ops(flags=1).up(BLK, 4) \
        .blk_req(0, 0, BLK_T_OUT, 3, 512, False, 0x3000).notify(BLK).bytes()
    s["blk-flush-getid"] = Ops().up(BLK, 3) \
        .blk_req(0, 0, BLK_T_FLUSH, 0, 0, False, 0x3000) \
        .blk_req(1, 3, BLK_T_GET_ID, 0, 20, True, 0x4000).notify(BLK, ioeventfd=True).bytes()
    s["blk-range"] = Ops().up(BLK, 4).blk_req(0, 0, BLK_T_IN, 7, 1024, True, 0x3000) \
        .blk_req(1, 4, 0x99, 0, 512, True, 0x4000).notify(BLK).bytes()

    hostile = Ops().up(BLK, 4)
    hostile.ram(M_DESC + 16 * 9, desc(0x3000, 16, F_NEXT, 9))
    hostile.offer(BLK, 0, 9)
    hostile.blk_req(1, 0, BLK_T_IN, 0, 512, True, 0x3000).notify(BLK)
    hostile.offer(BLK, 2, 200).notify(BLK).rd(BLK, "status").wr(BLK, "status", 0)
    s["blk-hostile"] = hostile.bytes()

    rng = Ops().up(RNG, 2)
    rng.ram(RNG_BASE + M_DESC, desc(0xb000, 64, F_WRITE))
    rng.offer(RNG, 0, 0).notify(RNG).rd(RNG, "isr").wr(RNG, "isr_ack", 1)
    s["rng"] = rng.bytes()

    both = Ops().up(BLK, 8).up(RNG, 8)
    both.ram(RNG_BASE + M_DESC, desc(0x3100, 0x100, F_WRITE))
    both.offer(RNG, 0, 0)
    both.blk_req(0, 0, BLK_T_IN, 0, 512, True, 0x3000)
    both.notify(RNG).notify(BLK).notify(BLK, 5).wr(BLK, "queue_sel", 7).rd(BLK, "queue_ready")
    s["both"] = both.bytes()

    # The balloon: a free page report (queue 2) of two ranges, one past
    # RAM's end; an inflate (queue 0) naming pages in and out of RAM; the
    # driver's page count written and the config read back.
    report = Ops().up(BALLOON, 3, q=2)
    report.ram(BALLOON_BASE + M_DESC, desc(0x4000, 0x1000, F_WRITE | F_NEXT, 1))
    report.ram(BALLOON_BASE + M_DESC + 16, desc(0xf800, 0x1000, F_WRITE))
    report.offer(BALLOON, 0, 0).notify(BALLOON, 2)
    report.wr(BALLOON, 0x104, 7).rd(BALLOON, "config", 8).rd(BALLOON, 0x108, 4)
    s["balloon-report"] = report.bytes()
    inflate = Ops().up(BALLOON, 2, q=0)
    inflate.ram(0x5000, struct.pack("<III", 4, 5, 0xfffff))
    inflate.ram(BALLOON_BASE + M_DESC, desc(0x5000, 12, 0))
    inflate.offer(BALLOON, 0, 0).notify(BALLOON, 0).notify(BALLOON, 1).notify(BALLOON, 3)
    s["balloon-inflate"] = inflate.bytes()
    return s


# ---- fuzz_layer: one OCI layer, a tar (some gzip'd) ----------------------
def tar_bytes(entries, fmt=tarfile.GNU_FORMAT, gz=False):
    """entries: (name, kind, arg, extra) with kind file/dir/sym/link/chr/fifo;
    fixed owners and mtimes, so the bytes are the same every time."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, kind, arg, *extra in entries:
            ti = tarfile.TarInfo(name)
            ti.mtime, ti.uid, ti.gid, ti.mode = 1700000000, 0, 0, 0o644
            data = None
            if kind == "file":
                data = arg
                ti.size = len(data)
            elif kind == "dir":
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            elif kind == "sym":
                ti.type, ti.linkname = tarfile.SYMTYPE, arg
            elif kind == "link":
                ti.type, ti.linkname = tarfile.LNKTYPE, arg
            elif kind == "chr":
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
            elif kind == "fifo":
                ti.type = tarfile.FIFOTYPE
            if extra:
                ti.pax_headers = extra[0]
            tf.addfile(ti, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if gz else raw


def layer_seeds():
    passwd = b"root:x:0:0:root:/root:/bin/sh\ntester:x:1000:1000::/home/tester:/bin/sh\n"
    basic = [("etc/", "dir", None), ("etc/passwd", "file", passwd),
             ("bin/", "dir", None), ("bin/busybox", "file", b"\x7fELF" + bytes(5000)),
             ("bin/sh", "sym", "busybox"), ("bin/ls", "link", "bin/busybox"),
             ("usr/lib/x", "file", b"x" * 4097), ("dev/null", "chr", None),
             ("run/fifo", "fifo", None)]
    s = {}
    s["basic"] = tar_bytes(basic)
    s["basic.gz"] = tar_bytes(basic, gz=True)
    s["whiteouts"] = tar_bytes([
        ("a/", "dir", None), ("a/keep", "file", b"k"), ("a/gone", "file", b"g"),
        ("a/.wh.gone", "file", b""), ("b/", "dir", None), ("b/old", "file", b"o"),
        ("b/.wh..wh..opq", "file", b""), ("b/new", "file", b"n"),
        ("c/.wh..wh.plnk", "dir", None), (".wh.missing", "file", b"")])
    long_dir = "/".join(["d" * 100] * 3)
    s["long-names-gnu"] = tar_bytes([(long_dir + "/" + "f" * 200, "file", b"long"),
                                     ("l" * 150, "sym", "t" * 300),
                                     ("h" * 120, "link", long_dir + "/" + "f" * 200)])
    s["long-names-pax"] = tar_bytes([(long_dir + "/" + "p" * 255, "file", b"pax"),
                                     ("s" * 200, "sym", "/" + "u" * 1000)],
                                    fmt=tarfile.PAX_FORMAT)
    s["xattrs-pax"] = tar_bytes([
        ("f", "file", b"data", {"SCHILY.xattr.user.a": "1",
                                "SCHILY.xattr.security.capability": "\x01\x00\x00\x02",
                                "SCHILY.xattr.trusted.overlay.opaque": "y",
                                "SCHILY.xattr.system.nfs4_acl": "z"}),
        ("d/", "dir", None, {"SCHILY.xattr.user.dir": "v" * 300})], fmt=tarfile.PAX_FORMAT)
    s["escapes"] = tar_bytes([
        ("../../etc/passwd", "file", passwd), ("/abs/file", "file", b"a"),
        ("up", "sym", "../../.."), ("up/through", "file", b"t"),
        ("abs", "sym", "/etc"), ("abs/x", "file", b"x"), ("./././y", "file", b"y")])
    s["symlink-loop"] = tar_bytes([("loop", "sym", "loop"), ("loop/z", "file", b"z")])
    s["replace"] = tar_bytes([
        ("x", "file", b"file"), ("x/", "dir", None), ("x/child", "file", b"c"),
        ("x", "file", b"file again"), ("y/", "dir", None), ("y", "sym", "x"),
        ("h1", "file", b"h"), ("h2", "link", "h1"), ("h1", "file", b"new")])
    s["hardlink-missing"] = tar_bytes([("h3", "link", "nowhere")])
    s["empty"] = b""
    s["end-only"] = bytes(1024)
    return s


# ---- fuzz_registry_auth: response heads and WWW-Authenticate values -----
def head(status, *headers, version="HTTP/1.1"):
    lines = [f"{version} {status}"] + list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def registry_auth_seeds():
    hub = ('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
           'scope="repository:library/busybox:pull"')
    digest = "sha256:" + "ab" * 32
    s = {}
    s["bearer-401"] = head("401 Unauthorized", "Content-Type: application/json",
                           "WWW-Authenticate: " + hub, "Content-Length: 157")
    s["manifest-200"] = head("200 OK",
                             "Content-Type: application/vnd.oci.image.index.v1+json",
                             "Docker-Content-Digest: " + digest, "Content-Length: 1234")
    s["continue-then-200"] = head("100 Continue") + head("200 OK", "Content-Length: 0")
    s["basic-401"] = head("401 Unauthorized", 'WWW-Authenticate: Basic realm="Registry Realm"')
    s["http2-lowercase"] = head("307", "location: https://cdn.example/blob?sig=x",
                                "content-length: 0", 'www-authenticate: bearer realm="x"',
                                version="HTTP/2")
    s["escapes-and-commas"] = head(
        "401", 'WWW-Authenticate:\tBearer  realm="https://a.example/t?x=\\"1\\"",'
        'scope="repository:a/b:pull,push" , service=unquoted,realm="second"')
    s["long-keys-and-scheme"] = head(
        "401", "WWW-Authenticate: BearerBearerBearerBearer realmrealmrealmrealm=\"x\","
        " ,,service = \"y\",scope")
    s["lengths"] = head("200", "Content-Length: 99999999999999999999", "Content-Length: -1",
                        "Content-Length: 12abc", "Content-Length:   42  ")
    s["cut-short"] = b'HTTP/1.1 401\r\nWWW-Authenticate: Bearer realm="unterminated'
    s["odd-status"] = b"HTTP/\r\nHTTP/1.1 20\r\nHTTP/1.1 2000 Big\r\n\r\n\n"
    s["nul-in-header"] = b"HTTP/1.1 200\r\nDocker-Content-Digest: sha256:ab \0cd\r\n\r\n"
    s["challenge-only"] = hub.encode()
    s["empty"] = b""
    return s


# ---- fuzz_net_frame: a mode byte, then an Ethernet frame from the guest --
NF_FIX_ADDR, NF_FIX_IP, NF_FIX_L4 = 1, 2, 4
NF_GUEST_MAC = bytes.fromhex("5a94efe40cee")
NF_GW_MAC = bytes.fromhex("5255c0a87f01")
NF_GUEST, NF_GW = bytes([192, 168, 127, 2]), bytes([192, 168, 127, 1])
NF_HOST, NF_WORLD = bytes([192, 168, 127, 254]), bytes([203, 0, 113, 10])


def nf_sum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def nf_ipv4(proto, dst, l4, csum_off, flags_frag=0x4000, ttl=64, ihl=5):
    if csum_off is not None:
        pseudo = b"" if proto == 1 else NF_GUEST + dst + struct.pack("!BBH", 0, proto, len(l4))
        c = nf_sum(pseudo + l4)
        l4 = l4[:csum_off] + struct.pack("!H", c) + l4[csum_off + 2:]
    opts = b"\x01" * 4 * (ihl - 5)
    h = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, 20 + len(opts) + len(l4), 1, flags_frag, ttl,
                    proto, 0, NF_GUEST, dst) + opts
    h = h[:10] + struct.pack("!H", nf_sum(h)) + h[12:]
    return NF_GW_MAC + NF_GUEST_MAC + b"\x08\x00" + h + l4


def nf_tcp(dst, dport, flags, data=b"", urp=0, opts=b""):
    t = struct.pack("!HHIIBBHHH", 40000, dport, 1000, 5000, (5 + len(opts) // 4) << 4, flags,
                    65535, 0, urp) + opts + data
    return nf_ipv4(6, dst, t, 16)


def nf_udp(dst, dport, data):
    return nf_ipv4(17, dst, struct.pack("!HHHH", 33333, dport, 8 + len(data), 0) + data, 6)


def nf_icmp(dst, typ=8, data=b"0123456789abcdef"):
    return nf_ipv4(1, dst, struct.pack("!BBHHH", typ, 0, 0, 0x42, 1) + data, 2)


def nf_arp(op=1, sender=NF_GUEST, target=NF_GW):
    body = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, op, NF_GUEST_MAC, sender, bytes(6), target)
    return b"\xff" * 6 + NF_GUEST_MAC + b"\x08\x06" + body


def net_frame_seeds():
    query = (struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + b"\x07example\x03com\x00"
             + struct.pack("!HH", 1, 1))
    fix = NF_FIX_ADDR | NF_FIX_IP | NF_FIX_L4
    frames = {
        "arp-request-gw": nf_arp(),
        "arp-reply": nf_arp(op=2, target=NF_HOST),
        "arp-spoof": nf_arp(sender=bytes([192, 168, 127, 9])),
        "tcp-syn-world": nf_tcp(NF_WORLD, 443, 0x02),
        "tcp-syn-host": nf_tcp(NF_HOST, 8080, 0x02),
        "tcp-syn-gw-dns": nf_tcp(NF_GW, 53, 0x02),
        "tcp-syn-gw-22": nf_tcp(NF_GW, 22, 0x02),
        "tcp-urg": nf_tcp(NF_WORLD, 80, 0x38, b"urgent data", urp=5),
        "tcp-syn-fin": nf_tcp(NF_WORLD, 80, 0x03),
        # Linux's SYN options, and a SYN-ACK's MSS at an odd offset: what a
        # repeated SYN has its MSS option turned into NOPs in.
        "tcp-syn-options": nf_tcp(NF_WORLD, 443, 0x02, opts=bytes.fromhex(
            "020405b40402080a0000000100000000" "01030307")),
        "tcp-synack-mss-odd": nf_tcp(NF_WORLD, 443, 0x12, opts=bytes.fromhex("010204ffd8010101")),
        "tcp-loopback": nf_tcp(bytes([127, 0, 0, 1]), 7777, 0x02),
        "tcp-zero": nf_tcp(bytes(4), 7777, 0x02),
        "udp-dns-gw": nf_udp(NF_GW, 53, query),
        "udp-gw-123": nf_udp(NF_GW, 123, b"ntp"),
        "udp-world": nf_udp(NF_WORLD, 5000, b"datagram"),
        "udp-broadcast": nf_udp(b"\xff" * 4, 5000, b"x"),
        "udp-tftp": nf_udp(NF_HOST, 69, b"\x00\x01file\x00octet\x00"),
        "icmp-echo-gw": nf_icmp(NF_GW),
        "icmp-echo-world": nf_icmp(NF_WORLD),
        "icmp-timestamp-gw": nf_icmp(NF_GW, typ=13),
        "ip-fragment": nf_ipv4(17, NF_WORLD, struct.pack("!HHHH", 1, 2, 16, 0) + bytes(8), 6,
                               flags_frag=0x2000),
        "ip-options": nf_ipv4(6, NF_WORLD, struct.pack("!HHIIBBHHH", 1, 2, 0, 0, 80, 2, 0, 0, 0),
                              16, ihl=6),
        "ip-ttl0": nf_udp(NF_WORLD, 5000, b"x")[:22] + b"\x00" + nf_udp(NF_WORLD, 5000, b"x")[23:],
        "ipv6": NF_GW_MAC + NF_GUEST_MAC + b"\x86\xdd" + bytes(48),
        "vlan": NF_GW_MAC + NF_GUEST_MAC + b"\x81\x00" + bytes(46),
        "runt": NF_GW_MAC + NF_GUEST_MAC,
    }
    seeds = {}
    for name, f in frames.items():
        seeds[name] = bytes([0]) + f
        seeds[name + "-fixed"] = bytes([fix]) + f
    return seeds


# ---- fuzz_virtio_net: operations, see the header of fuzz_virtio_net.c ----
NET_FRAME_MAX = 65534
N_TX, N_RX, N_LOOP, N_WORKER, N_RAM, N_UP, N_KICK, N_CFG = range(8)


class NetOps:
    def __init__(self):
        self.b = bytearray()

    def tx(self, length, sel=0, flags=0, gso=0, data=b"", seed=0):
        self.b += struct.pack("<BBBB", N_TX, sel, flags, gso)
        self.b += struct.pack("<I", length)[:3] + bytes([len(data)])
        self.b += struct.pack("<I", seed) + data
        return self

    def rx(self, count, size, shape=0):
        self.b += struct.pack("<BBHB", N_RX, count, size, shape)
        return self

    def loop(self):
        self.b.append(N_LOOP)
        return self

    def worker(self, what, length=0, data=b""):
        self.b += struct.pack("<BB", N_WORKER, what)
        self.b += struct.pack("<I", length)[:3] + bytes([len(data)]) + data
        return self

    def send(self, length, data=b""):
        return self.worker(0, length, data)

    def read(self):
        return self.worker(252)  # 252 % 5 == 2: read up to 252 // 8 + 1 frames

    def shrink(self):
        return self.worker(3)

    def hangup(self):
        return self.worker(4)

    def ram(self, off, data):
        self.b += struct.pack("<BHB", N_RAM, off, len(data)) + data
        return self

    def up(self, feat=0):
        self.b += bytes([N_UP, feat])
        return self

    def kick(self, q):
        self.b += bytes([N_KICK, q])
        return self

    def cfg(self, off, lenidx, write=0, val=0):
        self.b += struct.pack("<BBBBI", N_CFG, off, lenidx, write, val)
        return self


def net_seeds():
    eth = bytes.fromhex("5255c0a87f01" "5a94efe40cee" "0800") + b"\x45\x00"
    s = {}
    s["tx-joined"] = NetOps().tx(60, data=eth).loop().read().b
    s["tx-split"] = NetOps().tx(1514, sel=1 << 2, data=eth).read().b
    s["tx-many"] = NetOps().tx(9000, sel=(7 << 2) | 0x20, seed=0x1234567).read().b
    s["tx-max"] = NetOps().tx(NET_FRAME_MAX, sel=3 << 2).read().b
    s["tx-drops"] = (NetOps().tx(13).tx(0, sel=2, seed=5).tx(NET_FRAME_MAX + 1)
                     .tx(100, flags=0x81).tx(100, gso=0x81).tx(100, sel=1).read().b)
    s["tx-eagain"] = NetOps().shrink().tx(4000).tx(4000).tx(4000).tx(4000).kick(1).loop() \
        .read().loop().read().read().loop().tx(4000).read().loop().b
    s["rx-one"] = NetOps().rx(8, 1536).send(60, eth).loop().b
    # The target's ring holds 32 buffers: 4 KiB ones fit a 64 KiB frame.
    s["rx-scatter"] = NetOps().rx(32, 4096).send(NET_FRAME_MAX).loop().send(4096).loop().b
    s["rx-dry"] = NetOps().rx(5, 4096).send(NET_FRAME_MAX).send(100).loop().rx(8, 4096, 4) \
        .loop().kick(0).loop().rx(8, 4096).loop().b
    s["rx-drops"] = NetOps().send(NET_FRAME_MAX + 1).send(3).rx(2, 20).rx(4, 1536) \
        .send(64).loop().rx(32, 64).send(NET_FRAME_MAX).loop().b
    s["rx-shapes"] = NetOps().rx(10, 3000, 1).rx(10, 1000, 2).rx(4, 0, 3).send(5000).loop().b
    s["no-mergeable"] = NetOps().up(1).rx(4, 1536).send(3000).send(1000).loop().b
    s["hangup"] = NetOps().rx(4, 1536).send(200).send(300).hangup().loop().tx(100).b
    s["hangup-held"] = NetOps().shrink().tx(4000).tx(4000).tx(4000).rx(4, 1536).loop() \
        .hangup().loop().tx(60).b
    s["reset-held"] = NetOps().shrink().tx(4000).tx(4000).tx(4000).rx(3, 1536) \
        .send(NET_FRAME_MAX).loop().up(0).read().rx(8, 1536).loop().b
    s["rings"] = NetOps().rx(4, 1536).ram(0x2000 + 2, b"\x40\x00").kick(0) \
        .ram(0x3000 + 0x1000 + 2, b"\xff\x7f").kick(1).up(0x80 | 0).tx(60).b
    # GUEST_CSUM, and a driver asking for event indices the device does not
    # offer: refused, then brought up without; a used_event written anyway.
    s["csum-used-event"] = NetOps().up(8 | 4).up(4).rx(8, 1536).send(60, eth).loop() \
        .ram(0x2000 + 4 + 2 * 32, b"\x05\x00").send(60, eth).send(60, eth).loop() \
        .tx(60).kick(1).loop().read().tx(60).tx(60).loop().read().read().b
    s["config"] = NetOps().cfg(0, 3).cfg(6, 1).cfg(10, 1).cfg(0, 0, 1, 0xff).cfg(11, 3) \
        .cfg(20, 2).cfg(5, 4).b
    return s


# ---- fuzz_virtio_fs: a threads byte, then operations (fuzz_virtio_fs.c) --
FS_CHAIN_MAX = 64 + 4
FUSE_LOOKUP, FUSE_FORGET, FUSE_GETATTR, FUSE_READ, FUSE_WRITE = 1, 2, 3, 15, 16
FUSE_BATCH_FORGET = 42
(F_CHAIN, F_DESC, F_OFFER, F_RAM, F_UP, F_KICK, F_WAIT, F_RESET,
 F_CFG) = range(9)
F_NO_KICK, F_W_FIRST, F_PAST_RAM, F_ZERO_LEN = 1, 2, 4, 8


class FsOps:
    def __init__(self, threads=3):
        self.b = bytearray([threads])

    def chain(self, q, n, split, sel=0, seed=1, opcode=FUSE_GETATTR, scale=1):
        self.b += struct.pack("<BBBBBIB", F_CHAIN, q, n - 1, split,
                              sel | (scale << 4), seed, opcode)
        return self

    def request(self, n=2, split=1, **kw):
        return self.chain(1, n, split, **kw)

    def forget(self, seed=1, **kw):
        return self.chain(0, 1, 1, opcode=FUSE_FORGET, scale=2, seed=seed, **kw)

    def desc(self, q, i, addr, length, flags=0, nxt=0):
        self.b += struct.pack("<BBBIIBB", F_DESC, q, i, addr, length, flags, nxt)
        return self

    def offer(self, q, head):
        self.b += bytes([F_OFFER, q, head])
        return self

    def ram(self, off, data):
        self.b += struct.pack("<BHB", F_RAM, off, len(data)) + data
        return self

    def up(self, feat=0):
        self.b += bytes([F_UP, feat])
        return self

    def kick(self, q):
        self.b += bytes([F_KICK, q])
        return self

    def wait(self):
        self.b.append(F_WAIT)
        return self

    def reset(self):
        self.b.append(F_RESET)
        return self

    def cfg(self, off, lenidx, write=0, val=0):
        self.b += struct.pack("<BBBBI", F_CFG, off, lenidx, write, val)
        return self


def fs_seeds():
    s = {}
    s["round-trip"] = FsOps().request(seed=1, scale=2).wait().request(4, 2, seed=7).wait().b
    s["forgets"] = FsOps().forget(3).forget(4).forget(5).wait().b
    s["forget-request-q"] = FsOps().request(1, 1, opcode=FUSE_FORGET, scale=2).wait() \
        .request(1, 1, opcode=FUSE_BATCH_FORGET, scale=2).wait().b
    s["write-longest"] = FsOps().request(FS_CHAIN_MAX, FS_CHAIN_MAX - 2, opcode=FUSE_WRITE,
                                         scale=3, seed=11).wait().b
    s["read-longest"] = FsOps().request(FS_CHAIN_MAX - 1, 2, opcode=FUSE_READ, scale=3,
                                        seed=12).wait().b
    s["too-long"] = FsOps().request(FS_CHAIN_MAX + 1, 3, scale=1).wait().b
    s["malformed"] = (FsOps().request(1, 0).request(2, 1, scale=0).request(1, 1)
                      .request(2, 1, sel=F_W_FIRST).request(2, 1, sel=F_PAST_RAM)
                      .request(3, 1, sel=F_ZERO_LEN).chain(0, 1, 0).wait().b)
    many = FsOps(0)
    for i in range(60):
        many.request(2, 1, seed=100 + i, sel=F_NO_KICK, scale=1)
    for i in range(120):
        many.forget(500 + i, sel=F_NO_KICK)
    s["list-full"] = many.kick(1).kick(0).wait().b
    s["reset-in-flight"] = FsOps(3).request(seed=2).request(seed=3).request(seed=4) \
        .forget(5).reset().kick(1).request().up(0).request(seed=6).wait().b
    s["teardown-in-flight"] = FsOps(1).request(seed=2, scale=3).request(seed=3, scale=3) \
        .request(seed=4, scale=3).b
    s["raw-desc"] = (FsOps().desc(1, 0, 0x8000, 40, F_NEXT, 1).desc(1, 1, 0x9000, 64, F_WRITE)
                     .offer(1, 0).wait()
                     .desc(1, 2, 0x8000, 40, F_NEXT, 2).offer(1, 2)
                     .desc(1, 3, 0xfffffff0, 64).offer(1, 3)
                     .desc(1, 4, 0x8000, 40, F_INDIRECT).offer(1, 4)
                     .desc(1, 5, 0x8000, 40, F_NEXT, 200).offer(1, 5).wait().b)
    s["same-head"] = FsOps().desc(1, 0, 0x8000, 40, F_NEXT, 1).desc(1, 1, 0x9000, 64, F_WRITE) \
        .offer(1, 0).offer(1, 0).offer(1, 0).wait().b
    s["rings"] = FsOps().request().ram(0x1000 + 0x1000 + 2, b"\xff\x7f").kick(0) \
        .ram(0x4000 + 0x1000 + 2, b"\x40\x00").kick(1).up(0x80 | 0).request().wait().b
    s["config"] = FsOps().cfg(0, 2).cfg(32, 2).cfg(36, 2).cfg(38, 1).cfg(0, 0, 1, 0xff) \
        .cfg(40, 2).cfg(35, 3).b
    s["reset-down"] = FsOps().request().reset().request().kick(1).forget().wait().b
    return s


# ---- fuzz_dns: a mode byte, then a query, or a length-prefixed query and an answer

def dns_name(name):
    out = b""
    for label in name.split(".") if name else []:
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def dns_query(name, qtype=1, qid=0x1234, flags=0x0100, extra=b"", arcount=0, qdcount=1):
    return (struct.pack(">HHHHHH", qid, flags, qdcount, 0, 0, arcount) + dns_name(name)
            + struct.pack(">HH", qtype, 1) + extra)


def dns_rr(owner, rtype, data, ttl=300, rclass=1):
    return owner + struct.pack(">HHIH", rtype, rclass, ttl, len(data)) + data


def dns_answer(query, records, flags=0x8180):
    qend = len(query)
    return (struct.pack(">HHHHHH", 0x1234, flags, 1, len(records), 0, 0) + query[12:qend]
            + b"".join(records))


def dns_seeds():
    opt = b"\0" + struct.pack(">HHIH", 41, 4096, 0, 0)
    s = {}
    s["q-a"] = b"\0" + dns_query("www.example.com")
    s["q-edns"] = b"\0" + dns_query("www.example.com", extra=opt, arcount=1)
    s["q-local"] = b"\0" + dns_query("host.gantry.internal")
    s["q-local-aaaa"] = b"\0" + dns_query("gateway.docker.internal", qtype=28)
    s["q-nxdomain"] = b"\0" + dns_query("nope.containers.internal")
    s["q-root"] = b"\0" + dns_query("", qtype=2)
    s["q-refused"] = b"\0" + dns_query("abc.example.com", qtype=16)
    s["q-compressed"] = b"\0" + dns_query("a.com")[:12] + b"\1b\xc0\x0c" + struct.pack(">HH", 1, 1)
    s["q-two-questions"] = b"\0" + dns_query("a.com", qdcount=2) + dns_name("b.com") + b"\0\1\0\1"
    s["q-response"] = b"\0" + dns_query("a.com", flags=0x8100)
    s["q-trailing"] = b"\0" + dns_query("a.com") + b"\0"
    s["q-long-label"] = b"\0" + dns_query("a" * 64 + ".com")
    s["q-bad-char"] = b"\0" + dns_query("a b.com")

    def pair(query, ans):
        return b"\1" + struct.pack(">H", len(query)) + query + ans

    q = dns_query("www.example.com")
    ptr = b"\xc0\x0c"
    s["a-one"] = pair(q, dns_answer(q, [dns_rr(ptr, 1, bytes([1, 2, 3, 4]))]))
    # www.example.com -> a.cdn.net -> b.cdn.net, out of order, compressed.
    base = len(q)
    b_cdn = dns_rr(dns_name("b.cdn.net"), 1, bytes([1, 2, 3, 4]))
    a_cdn = dns_rr(dns_name("a.cdn.net"), 5, struct.pack(">H", 0xc000 | base), ttl=60)
    www = dns_rr(ptr, 5, b"\1a" + struct.pack(">H", 0xc000 | (base + 2)), ttl=60)
    other = dns_rr(dns_name("other.net"), 1, bytes([6, 6, 6, 6]))
    s["a-cname-chain"] = pair(q, dns_answer(q, [b_cdn, a_cdn, www, other]))
    s["a-self-pointer"] = pair(q, dns_answer(q, [dns_rr(struct.pack(">H", 0xc000 | base), 1,
                                                          bytes(4))]))
    s["a-pointer-chain"] = pair(q, dns_answer(q, [
        dns_rr(dns_name("x"), 1, bytes(4)),
        dns_rr(struct.pack(">H", 0xc000 | base), 5, struct.pack(">H", 0xc000 | (base + 13))),
    ]))
    s["a-cname-loop"] = pair(q, dns_answer(q, [
        dns_rr(ptr, 5, dns_name("x.net")),
        dns_rr(dns_name("x.net"), 5, ptr),
    ]))
    s["a-short"] = pair(q, dns_answer(q, [dns_rr(ptr, 1, bytes(4))])[:-3])
    s["a-other-question"] = pair(q, dns_answer(dns_query("www.example.org"),
                                               [dns_rr(ptr, 1, bytes(4))]))
    s["a-many"] = pair(q, dns_answer(q, [dns_rr(ptr, 1, bytes([10, 0, 0, i])) for i in range(40)]))
    s["a-odd-names"] = pair(q, dns_answer(q, [dns_rr(ptr, 5, b"\3a.b\0"),
                                              dns_rr(b"\3a.b\0", 1, bytes(4))]))
    return s


# ---- fuzz_net_policy: a policy document; fuzz_net_judge: a policy and destinations

def net_policy_seeds():
    docs = {
        "empty": "{}",
        "default-deny": '{"default":"deny"}',
        "reference": '{"default":"deny","rules":[{"action":"deny","cidr":"203.0.113.10/32"},'
                     '{"action":"allow","cidr":"203.0.113.0/24","proto":"tcp","ports":"443"}],'
                     '"allowDomains":["api.example.com","*.packages.example.com"]}',
        "full": '{"default":"allow","allowLocal":true,"rules":[{"action":"deny","proto":"udp",'
                '"ports":"53,443,8000-9000"},{"cidr":"0.0.0.0/0","proto":"icmp"},{}],'
                '"allowDomains":["A.Example.COM."],"resolveDomains":["ntp.test","_srv.x-y.test"]}',
        "canonical": '{"default":"deny","allowLocal":false,"rules":[{"action":"allow",'
                     '"cidr":"10.0.0.0/8","proto":"any","ports":"1-65535"}],'
                     '"allowDomains":[],"resolveDomains":[]}',
        "host-bits": '{"rules":[{"cidr":"10.0.0.1/8"}]}',
        "bad-ports": '{"rules":[{"ports":"53, 443"}]}',
        "icmp-ports": '{"rules":[{"proto":"icmp","ports":"7"}]}',
        "bad-wildcard": '{"allowDomains":["a.*.com"]}',
        "unknown-key": '{"defualt":"deny"}',
        "duplicate-key": '{"default":"deny","default":"allow"}',
        "nul": '{"allowDomains":["a\\u0000b"]}',
        "not-object": "[1,2]",
    }
    return {k: v.encode() for k, v in docs.items()}


def nj_rule(allow, any_addr, proto, nports, net, prefix, ranges=((0, 0), (0, 0))):
    flags = allow | any_addr << 1 | proto << 2 | nports << 4
    b = struct.pack(">BIB", flags, net, prefix)
    for lo, hi in ranges:
        b += struct.pack(">HH", lo, hi)
    return b


def nj_ip(a, b, c, d):
    return a << 24 | b << 16 | c << 8 | d


def nj_dst(ip, proto, port):
    return struct.pack(">IBH", ip, proto, port)


def net_judge_seeds():
    # proto in rules: 0 any, 1 tcp, 2 udp, 3 icmp; in destinations: 0 tcp, 1 udp, 2 icmp.
    dsts = b"".join(nj_dst(ip, pr, port) for ip, pr, port in [
        (nj_ip(203, 0, 113, 10), 0, 443), (nj_ip(203, 0, 113, 11), 0, 443),
        (nj_ip(10, 99, 0, 10), 0, 443), (nj_ip(198, 51, 100, 20), 1, 53),
        (nj_ip(198, 51, 100, 20), 2, 0), (nj_ip(1, 1, 1, 1), 2, 0),
        (nj_ip(172, 31, 0, 5), 1, 9999), (nj_ip(100, 64, 0, 1), 0, 80)])
    rules = (nj_rule(0, 0, 0, 0, nj_ip(203, 0, 113, 11), 32) +
             nj_rule(1, 0, 1, 1, nj_ip(203, 0, 113, 0), 24, ((443, 443), (0, 0))) +
             nj_rule(1, 0, 0, 2, nj_ip(198, 18, 0, 0), 15, ((53, 53), (8000, 9000))))
    learned = (struct.pack(">IH", nj_ip(198, 51, 100, 20), 300) +
               struct.pack(">IH", nj_ip(10, 99, 0, 10), 0))
    s = {}
    s["default-allow"] = struct.pack(">BB", 1, 0) + struct.pack(">H", 10) + dsts
    s["reference"] = (struct.pack(">BB", 2 << 2, 3) + rules + learned +
                      struct.pack(">H", 10) + dsts)
    s["allow-local-host"] = (struct.pack(">BB", 1 | 2 | 2 << 2 | 16, 3) + rules + learned +
                             struct.pack(">IH", nj_ip(198, 51, 100, 7), 700) + dsts)
    s["expired"] = (struct.pack(">BB", 2 << 2, 0) + learned + struct.pack(">H", 3001) + dsts)
    s["any-rules"] = (struct.pack(">BB", 0, 2) + nj_rule(0, 1, 3, 0, 0, 0) +
                      nj_rule(1, 0, 0, 0, 0, 0) + struct.pack(">H", 0) + dsts)
    return s


# ---- fuzz_fuse: requests as fuzz_fuse.c reads them ------------------------
FUSE = {"lookup": 1, "forget": 2, "getattr": 3, "setattr": 4, "readlink": 5, "symlink": 6,
        "mknod": 8, "mkdir": 9, "unlink": 10, "rmdir": 11, "rename": 12, "link": 13,
        "open": 14, "read": 15, "write": 16, "statfs": 17, "release": 18, "fsync": 20,
        "setxattr": 21, "getxattr": 22, "listxattr": 23, "removexattr": 24, "flush": 25,
        "opendir": 27, "readdir": 28, "releasedir": 29, "access": 34, "create": 35,
        "interrupt": 36, "batch_forget": 42, "fallocate": 43, "readdirplus": 44,
        "rename2": 45, "lseek": 46, "syncfs": 50}
N_HUB, N_RW, N_RO, N_KNOWN = 0, 1, 2, 3
F_FH, F_NODE, F_WSIZE, F_RAWLEN = 1, 2, 4, 8


def freq(op, node, args=b"", flags=0, pick=0, cut=0, raw_len=None):
    r = struct.pack("<BBBBBH", FUSE[op], node, flags, pick, cut, len(args)) + args
    if raw_len is not None:
        r += struct.pack("<I", raw_len)
    return r


def name(*names):
    return b"".join(n.encode() + b"\0" for n in names)


def read_in(size=4096, offset=0):
    return struct.pack("<QQIIQII", 0, offset, size, 0, 0, 0, 0)


def setattr_in(valid, mode=0, size=0, mtime=0):
    return struct.pack("<IIQQQQQQIIIIIIII", valid, 0, 0, size, 0, 0, mtime, 0, 0, 0, 0, mode,
                       0, 0, 0, 0)


def fuse_seeds():
    O_RDWR, O_CREAT, O_TRUNC, O_EXCL = 2, 0o100, 0o1000, 0o200
    s = {}
    s["lookup-open-read"] = (freq("lookup", N_RW, name("f")) +
                             freq("open", N_KNOWN, struct.pack("<II", O_RDWR, 0)) +
                             freq("read", N_KNOWN, read_in(), F_FH) +
                             freq("getattr", N_KNOWN, struct.pack("<IIQ", 1, 0, 0), F_FH) +
                             freq("release", N_KNOWN, struct.pack("<QIIQ", 0, 0, 0, 0), F_FH))
    data = b"written by the guest"
    s["create-write"] = (freq("create", N_RW, struct.pack("<IIII", O_RDWR | O_CREAT, 0o100644, 0, 0)
                              + name("new")) +
                         freq("write", N_KNOWN, struct.pack("<QQIIQII", 0, 0, len(data), 0, 0, 0, 0)
                              + data, F_FH | F_WSIZE) +
                         freq("fsync", N_KNOWN, struct.pack("<QII", 0, 0, 0), F_FH) +
                         freq("flush", N_KNOWN, struct.pack("<QIIQ", 0, 0, 0, 0), F_FH))
    s["create-excl-trunc"] = freq("create", N_RW, struct.pack(
        "<IIII", O_RDWR | O_CREAT | O_EXCL | O_TRUNC, 0o106755, 0, 0) + name("f"))
    s["mkdir-rename"] = (freq("mkdir", N_RW, struct.pack("<II", 0o2755, 0) + name("nd")) +
                         freq("rename", N_RW, struct.pack("<Q", 0) + name("f", "g"), F_NODE, N_RW) +
                         freq("rename2", N_RW, struct.pack("<QII", 0, 2, 0) + name("g", "d"),
                              F_NODE, N_RW) +
                         freq("rmdir", N_RW, name("nd")) + freq("unlink", N_RW, name("g")))
    s["readdirplus"] = (freq("opendir", N_RW, struct.pack("<II", 0, 0)) +
                        freq("readdirplus", N_RW, read_in(4096), F_FH) +
                        freq("readdir", N_RW, read_in(64, 1), F_FH) +
                        freq("releasedir", N_RW, struct.pack("<QIIQ", 0, 0, 0, 0), F_FH))
    s["hub"] = (freq("opendir", N_HUB, struct.pack("<II", 0, 0)) +
                freq("readdirplus", N_HUB, read_in(4096), F_FH) +
                freq("lookup", N_HUB, name("ro")) + freq("statfs", N_HUB) +
                freq("mkdir", N_HUB, struct.pack("<II", 0o755, 0) + name("x")))
    s["symlink-link"] = (freq("symlink", N_RW, name("s", "../canary/secret")) +
                         freq("readlink", N_KNOWN) + freq("lookup", N_RW, name("l")) +
                         freq("link", N_RW, struct.pack("<Q", 0) + name("l2"), F_NODE, N_KNOWN) +
                         freq("lookup", N_RW, name("f")) +
                         freq("link", N_RW, struct.pack("<Q", 0) + name("hard"), F_NODE, 5))
    s["setattr"] = (freq("lookup", N_RW, name("f")) +
                    freq("setattr", N_KNOWN, setattr_in(1 | 8 | 16, 0o104755, 2, 1000)) +
                    freq("lookup", N_RW, name("fifo")) +
                    freq("setattr", N_KNOWN, setattr_in(8, size=0), pick=1) +
                    freq("lookup", N_RW, name("l")) +
                    freq("setattr", N_KNOWN, setattr_in(1, 0o777), pick=2))
    s["xattr"] = (freq("lookup", N_RW, name("f")) +
                  freq("setxattr", N_KNOWN, struct.pack("<II", 4, 0) + name("user.x") + b"vvvv") +
                  freq("getxattr", N_KNOWN, struct.pack("<II", 64, 0) + name("user.x")) +
                  freq("listxattr", N_KNOWN, struct.pack("<II", 0, 0)) +
                  freq("setxattr", N_KNOWN, struct.pack("<II", 4, 0) + name("security.capability")
                       + b"\1\0\0\2") +
                  freq("removexattr", N_KNOWN, name("user.x")))
    s["ro-writes"] = (freq("lookup", N_RO, name("f")) +
                      freq("open", N_KNOWN, struct.pack("<II", O_RDWR | O_TRUNC, 0)) +
                      freq("open", N_KNOWN, struct.pack("<II", 0, 0)) +
                      freq("write", N_KNOWN, struct.pack("<QQIIQII", 0, 0, 1, 0, 0, 0, 0) + b"x",
                           F_FH | F_WSIZE) +
                      freq("unlink", N_RO, name("f")) +
                      freq("setattr", N_KNOWN, setattr_in(8, size=0)) +
                      freq("access", N_RO, struct.pack("<II", 2, 0)))
    s["bad-names"] = (freq("lookup", N_RW, name("..")) + freq("lookup", N_HUB, name("..")) +
                      freq("lookup", N_RW, name("a/b")) + freq("lookup", N_RW, b"f") +
                      freq("lookup", N_RW, name("x" * 256)) +
                      freq("symlink", N_RW, name("..", "/etc")))
    s["framing"] = (freq("getattr", N_RW, struct.pack("<IIQ", 0, 0, 0), F_RAWLEN, raw_len=20) +
                    freq("getattr", N_RW, struct.pack("<IIQ", 0, 0, 0), F_RAWLEN, raw_len=1 << 20) +
                    freq("getattr", N_RW, struct.pack("<IIQ", 0, 0, 0), 0x10) +
                    freq("lookup", N_RW, name("f"), cut=3) +
                    freq("getattr", 0xff, struct.pack("<II", 0x41414141, 0x41) + b"\0" * 16))
    s["forget"] = (freq("lookup", N_RW, name("f")) + freq("lookup", N_RW, name("f")) +
                   freq("forget", N_KNOWN, struct.pack("<Q", 5)) +
                   freq("batch_forget", N_HUB, struct.pack("<II", 1, 0) + struct.pack("<QQ", 2, 1)) +
                   freq("getattr", N_KNOWN, struct.pack("<IIQ", 0, 0, 0)) +
                   freq("interrupt", N_HUB, struct.pack("<Q", 1)))
    s["fallocate-lseek"] = (freq("lookup", N_RW, name("f")) +
                            freq("open", N_KNOWN, struct.pack("<II", O_RDWR, 0)) +
                            freq("fallocate", N_KNOWN, struct.pack("<QQQII", 0, 0, 8192, 1, 0), F_FH) +
                            freq("lseek", N_KNOWN, struct.pack("<QQII", 0, 0, 4, 0), F_FH) +
                            freq("syncfs", N_RW, struct.pack("<Q", 0)))
    s["mknod"] = (freq("mknod", N_RW, struct.pack("<IIII", 0o10644, 0, 0, 0) + name("p")) +
                  freq("mknod", N_RW, struct.pack("<IIII", 0o20666, 0x0101, 0, 0) + name("null")) +
                  freq("lookup", N_RW, name("p")) +
                  freq("open", N_KNOWN, struct.pack("<II", 0, 0)))
    return s


def share_spec_seeds():
    # -share specs as users write them (fuzz_share_spec.c: one spec, or a
    # list one a line); encoded ones carry unpadded base64url paths.
    def b64(p):
        return base64.urlsafe_b64encode(p).rstrip(b"=")
    s = {}
    s["plain"] = b"src=/home/u/src"
    s["ctr-path"] = b"src=/home/u/src@/work"
    s["ro"] = b"data=/srv/data@/data,ro"
    s["ids"] = b"a=/x,uid=1000,gid=100"
    s["all-options"] = b"a=/x@/y,gid=100,ro,uid=1000"
    s["relative"] = b"p=../other/./dir/"
    s["path-comma"] = b"p=/a,b@/c,d,ro"
    s["path-at"] = b"p=/a@b@/c"
    s["path-equals"] = b"p=/a=b"
    s["unknown-option"] = b"p=/x,size=1"
    s["uid-alone"] = b"p=/x,uid=1"
    s["dotdot"] = b"p=/x@/a/../b"
    s["proc"] = b"p=/x@/proc/self"
    s["encoded"] = (b"p=" + b64(b"/a,b@c=d") + b"@" + b64(b"/w\xc3\xa9,x") +
                    b",ro,uid=1,gid=2,encoding=base64url")
    s["encoded-host-only"] = b"p=" + b64(b"/\x01\xff") + b",encoding=base64url"
    s["list"] = (b"src=.\ndata=/srv@/data,ro\nsrc=/other\nx=/o@/data/sub\n"
                 b"y=/o@/dat\nz=/o@/host")
    return s


def untar_seeds():
    """Streams as `tar -cf - -C DIR src` in a guest makes them, and hostile ones."""
    s = {}
    s["tree"] = tar_bytes([("src/", "dir", None), ("src/a", "file", b"alpha"),
                           ("src/sub/", "dir", None), ("src/sub/b", "file", b"b" * 5000),
                           ("src/l", "sym", "/etc/passwd")])
    s["file"] = tar_bytes([("src", "file", b"one file")])
    s["escapes"] = tar_bytes([
        ("src/", "dir", None), ("src/../beside/x", "file", b"x"),
        ("/tmp/gantry-fuzz-untar-escaped", "file", b"a"), ("beside/y", "file", b"y"),
        ("src/up", "sym", "../beside"), ("src/up/z", "file", b"z"),
        ("src/abs", "sym", "/tmp"), ("src/abs/gantry-fuzz-untar-escaped", "file", b"t")])
    s["odd-kinds"] = tar_bytes([("src/", "dir", None), ("src/null", "chr", None),
                                ("src/fifo", "fifo", None), ("src/hard", "link", "src/a"),
                                ("src/a", "file", b"a")])
    s["dir-over-file"] = tar_bytes([("src", "file", b"f"), ("src/", "dir", None),
                                    ("src/x", "file", b"x"), ("src", "sym", "/")])
    return s


def share_rpc_seeds():
    """Request messages as the VMM worker sends them, over RAM holding the
    FUSE request; and metadata values as meta.c writes them."""
    def msg(op, ins, outs):
        m = struct.pack("<IIIIQ", op, len(ins), len(outs), 0, 0)
        for off, ln in ins + outs:
            m += struct.pack("<QQ", off, ln)
        return m

    def rpc(ram_size, m, ram):
        return b"\0" + struct.pack("<HH", ram_size - 1, len(m)) + m + ram

    init = struct.pack("<IIQQIIII", 40 + 16, 26, 1, 0, 0, 0, 0, 0) + \
        struct.pack("<IIII", 7, 31, 0, 0)
    look = struct.pack("<IIQQIIII", 40 + 5, 1, 2, 1, 0, 0, 0, 0) + b"tag\0\0"
    s = {}
    s["init"] = rpc(4096, msg(1, [(0, len(init))], [(256, 512)]), init)
    s["lookup-split"] = rpc(4096, msg(1, [(0, 20), (20, len(look) - 20)], [(512, 128), (640, 16)]), look)
    s["reset"] = rpc(64, msg(2, [], []), b"")
    s["out-of-ram"] = rpc(64, msg(1, [(60, 8)], [(0, 4)]), b"")
    s["wraps"] = rpc(64, msg(1, [(0xffffffffffffff00, 0x200)], []), b"")
    s["too-many"] = rpc(4096, msg(1, [(0, 1)] * 300, []), b"")
    for name, v in (("meta-file", b"1000:1000:0644"), ("meta-suid", b"0:0:4755"),
                    ("meta-char", b"0:5:0620:char-136-3"), ("meta-block", b"6:6:0660:block-8-1"),
                    ("meta-bad", b"1:2:99999"), ("meta-neg", b"-1:0:0644")):
        s[name] = b"\1" + v
    return s


def secret_spec_seeds():
    # -secret specs as users write them, and -secret-file dotenvs (a
    # leading newline; fuzz_secret_spec.c).
    s = {}
    s["env"] = b"GITHUB_TOKEN"
    s["file"] = b"API_KEY=@/run/keys/api"
    s["file-ttl"] = b"API_KEY=@/run/keys/api,ttl=1m30s"
    s["cmd"] = b"NPM_TOKEN=!pass show npm/token"
    s["cmd-ttl0"] = b"K=!/usr/bin/vault kv get -field=v secret/k,ttl=0"
    s["bound"] = b"GH@github.com,*.githubusercontent.com"
    s["bound-file"] = b"GH@github.com=@/k,ttl=5m"
    s["literal"] = b"TOKEN=hunter2-not-allowed"
    s["path-comma"] = b"K=@/a,b,ttl=2s"
    s["micro"] = b"K=@/p,ttl=3\xc2\xb5s"
    s["bad-ttl"] = b"K=@/p,ttl=5y"
    s["bad-host"] = b"K@Upper.example"
    s["inject"] = b"OPENAI_API_KEY@api.openai.com,inject"
    s["inject-opts"] = b"K@a.test,b.test=!gh auth token,format=Bearer %s,header=Authorization,ttl=5m"
    s["inject-bad-format"] = b"K@a.test,header=X,format=%s%n"
    s["dotenv"] = b"\n# comment\nA=1\r\nB=\"two words\"\nC='x'\n\nD=\n"
    s["dotenv-bad"] = b"\nA=1\nno equals\n"
    s["dotenv-nul"] = b"\nA=x\x00y\n"
    return s


def client_hello(name=b"allowed.test", extra=b"", version=b"\x03\x03", ext_first=b""):
    """A TLS 1.2/1.3-style ClientHello record with a server_name of name
    (None: no such extension), extensions ext_first before it."""
    exts = ext_first
    if name is not None:
        entry = b"\x00" + len(name).to_bytes(2, "big") + name
        sni = len(entry).to_bytes(2, "big") + entry
        exts += b"\x00\x00" + len(sni).to_bytes(2, "big") + sni
    exts += extra
    body = (version + bytes(range(32)) + b"\x20" + bytes(32) + b"\x00\x04\x13\x01\x13\x02" +
            b"\x01\x00" + len(exts).to_bytes(2, "big") + exts)
    hs = b"\x01" + len(body).to_bytes(3, "big") + body
    return b"\x16\x03\x01" + len(hs).to_bytes(2, "big") + hs


def tls_hello_seeds():
    s = {}
    s["sni"] = client_hello()
    s["sni-upper-dot"] = client_hello(b"Allowed.Test.")
    s["no-sni"] = client_hello(None)
    s["alpn-first"] = client_hello(ext_first=b"\x00\x10\x00\x0b\x00\x09\x08http/1.1")
    s["padding"] = client_hello(extra=b"\x00\x15\x01\x00" + bytes(256))
    whole = client_hello(b"other.test")
    hs = whole[5:]
    # The handshake split over two records, as a large hello may be.
    s["two-records"] = (b"\x16\x03\x01" + (40).to_bytes(2, "big") + hs[:40] +
                        b"\x16\x03\x01" + (len(hs) - 40).to_bytes(2, "big") + hs[40:])
    s["truncated"] = whole[:60]
    s["http"] = b"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n"
    s["bad-name"] = client_hello(b"bad name")
    s["server-hello"] = b"\x16\x03\x03\x00\x04\x02\x00\x00\x00"
    return s


def egress_http_seeds():
    """fuzz_egress_http's layout: four bytes seeding the split points, then
    the guest's request stream; the placeholders are the target's."""
    tok, key, bearer = b"gantry-ph-token-0001", b"gantry-ph-apikey-001", b"gantry-ph-bearer-001"
    unfit, other = b"gantry-ph-unfit-0001", b"gantry-ph-foreign-01"
    get = b"GET /v1/x HTTP/1.1\r\nHost: api.test\r\n"
    s = {}

    def seed(name, stream, split=0x01020304):
        s[name] = struct.pack("<I", split) + stream

    seed("bearer", get + b"Authorization: Bearer " + tok + b"\r\nAccept: */*\r\n\r\n")
    seed("api-key", get + b"X-Api-Key: " + key + b"\r\n\r\n")
    seed("several", get + b"X-T: " + tok + b"," + tok + b"\r\nx-api-key: " + key + tok + b"\r\n\r\n")
    seed("misplaced", get + b"Authorization: Bearer " + key + b"\r\n\r\n")
    seed("format-absent", get + b"Accept: */*\r\n\r\n")
    seed("format-present", get + b"Authorization: Bearer " + bearer + b"\r\n\r\n")
    seed("basic", get + b"Authorization: Basic " + base64.b64encode(b"x-access-token:" + tok) +
         b"\r\nProxy-Authorization: basic " + base64.b64encode(b"u:" + other) + b"\r\n\r\n")
    seed("foreign-unfit", get + b"X-Other: " + other + b"\r\nX-Unfit: " + unfit + b"\r\n\r\n")
    body = b'{"k":"' + tok + b'"}'
    seed("content-length", b"POST /a HTTP/1.1\r\nContent-Length: %d\r\nX: " % len(body) + tok +
         b"\r\n\r\n" + body + get + b"X: " + tok + b"\r\n\r\n")
    seed("chunked", b"POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" +
         b"%x;x=y\r\n" % len(body) + body + b"\r\n3\r\nabc\r\n0\r\nX-Trailer: " + tok +
         b"\r\n\r\n" + get + b"X: " + tok + b"\r\n\r\n")
    seed("pipelined", b"\r\n" + get + b"A: " + tok + b"\r\n\r\n" +
         b"HEAD /2 HTTP/1.1\r\nX-Api-Key: " + key + b"\r\n\r\nDELETE /3 HTTP/1.0\r\n\r\n", 7)
    seed("upgrade", b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX: " + tok +
         b"\r\n\r\n\x81\x05hello" + get + b"X: " + tok + b"\r\n\r\n")
    seed("connect", b"CONNECT db.test:5432 HTTP/1.1\r\nHost: db.test:5432\r\n"
         b"Proxy-Authorization: Bearer " + tok + b"\r\n\r\n\x16\x03\x01\x00\x05hello")
    seed("no-placeholder", get + b"Cookie: a=b\r\nContent-Length: 5\r\n\r\nhello", 0xffffffff)
    seed("bare-lf", b"GET / HTTP/1.1\nHost: a\n\n")
    seed("obs-fold", get + b"X: a\r\n " + tok + b"\r\n\r\n")
    seed("cl-te", b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
         b"0\r\n\r\n")
    seed("many-lines", b"GET / HTTP/1.1\r\n" + b"".join(b"X: %d\r\n" % i for i in range(257)) + b"\r\n")
    return s


def api_seeds():
    """fuzz_api's layout: a method byte (GET, POST, DELETE, PUT by its value
    mod 4), the path, a newline, an optional "K:KEY" line, the body."""
    GET, POST, DELETE, PUT = b"\x00", b"\x01", b"\x02", b"\x03"
    s = {}

    def seed(name, method, path, body=b"", key=None):
        s[name] = method + path + b"\n" + (b"K:" + key + b"\n" if key else b"") + body

    seed("health", GET, b"/v1/health")
    seed("openapi", GET, b"/v1/openapi.yaml")
    seed("list", GET, b"/v1/sandboxes")
    seed("get", GET, b"/v1/sandboxes/box")
    seed("get-missing", GET, b"/v1/sandboxes/xbox")
    seed("create", POST, b"/v1/sandboxes",
         b'{"name":"box","cpus":2,"memoryMiB":512,"writable":false,"publish":["8080:80"],'
         b'"env":["A=b"],"secretNames":["TOKEN"]}', b"k1")
    seed("create-unknown", POST, b"/v1/sandboxes", b'{"name":"box","cpuz":2}')
    seed("create-type", POST, b"/v1/sandboxes", b'{"name":7}')
    seed("create-range", POST, b"/v1/sandboxes", b'{"name":"a","cpus":999}')
    seed("create-dup", POST, b"/v1/sandboxes", b'{"name":"a","name":"b"}')
    seed("create-refused", POST, b"/v1/sandboxes", b'{"name":"a","image":"x"}', b"k2")
    seed("start", POST, b"/v1/sandboxes/box/start", b"{}", b"k3")
    seed("start-fails", POST, b"/v1/sandboxes/fbox/start", b"", b"k4")
    seed("stop-body", POST, b"/v1/sandboxes/box/stop", b'{"now":true}')
    seed("delete", DELETE, b"/v1/sandboxes/box", b"", b"k5")
    seed("exec", POST, b"/v1/sandboxes/box/exec",
         b'{"argv":["sh","-c","true"],"cwd":"/tmp","env":["A=1"],"stdin":"in\\u0000",'
         b'"timeoutSeconds":5,"maxOutputBytes":4}')
    seed("exec-empty", POST, b"/v1/sandboxes/box/exec", b'{"argv":[]}')
    seed("exec-limit", POST, b"/v1/sandboxes/box/exec", b'{"argv":["x"],"maxOutputBytes":1}')
    seed("operation", GET, b"/v1/operations/00112233445566778899aabbccddeeff")
    seed("events", GET, b"/v1/events")
    seed("method", PUT, b"/v1/health")
    seed("bad-key", POST, b"/v1/sandboxes/box/stop", b"", b"a b")
    seed("bad-name", GET, b"/v1/sandboxes/..")
    seed("not-json", POST, b"/v1/sandboxes", b"{name")
    # E2B's: the control plane, envd's RPCs (the body is also what the
    # guest says back), /files (the key is its path).
    seed("e2b-create", POST, b"/v2/sandboxes",
         b'{"templateID":"base","metadata":{"a":"b"},"envVars":{"X":"1"},"timeout":60}')
    seed("e2b-list", GET, b"/v2/sandboxes")
    seed("e2b-timeout", POST, b"/sandboxes/e2b-000000000000/timeout", b'{"timeout":5}')
    seed("envd-start", POST, b"/process.Process/Start",
         b'\x00\x00\x00\x00\x3b{"process":{"cmd":"/bin/bash","args":["-l","-c","ls"]}}')
    seed("envd-list", POST, b"/process.Process/List", b"{}")
    seed("envd-signal", POST, b"/process.Process/SendSignal",
         b'{"process":{"pid":1000},"signal":"SIGNAL_SIGKILL"}')
    seed("envd-stat", POST, b"/filesystem.Filesystem/Stat",
         b'e f 7 644 1700000000 0 0 root root 8\n/tmp/a|b\n')
    seed("envd-listdir", POST, b"/filesystem.Filesystem/ListDir",
         b'e d 0 755 1 0 0 root root 6\n/tmp/d\ne l 3 777 2 1000 1000 u - 6\n/tmp/l\n'
         b'x 2\n/x\n')
    seed("files-get", GET, b"/files", b"bytes of the file", b"/tmp/f")
    seed("files-post", POST, b"/files",
         b'--b\r\nContent-Disposition: form-data; name="file"; filename="/tmp/x"\r\n\r\n'
         b'data\r\n--b--\r\n')
    return s


def files_seeds():
    """The file helper's records (proto/files.h), as fuzz_files reads them."""
    return {
        "listing": b"e d 0 755 1796475687 0 0 root root 2\n/d\n"
                   b"e f 5 644 -3 1000 50 - staff 9\n/d/new\nli\nx 5\n/nope\nn 8\n/d/a.txt\n",
        "link": b"e l 4 777 0 0 0 - - 7\n/d/link\n",
        "missing": b"x 1\n/\n",
        "other": b"e o 0 666 0 0 0 root tty 9\n/dev/null\n",
        "processes": b"p 1 0 0 S 1504 18\n/dev/.gantry-pause\np 42 1 1000 R 0 8\nsleep 33\n",
        "watch": b"y 2\n/w\nw c 9\nsub/f.txt\nw w 9\nsub/f.txt\nw m 1\ng\nw r 1\ng\nw a 1\nh\n",
    }


def crc64_xz(data):
    """CRC-64/XZ, as snapshot/state.c checks a state file with."""
    crc = 0xFFFFFFFFFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xC96C5795D7870F42 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFFFFFFFFFF


def state_file(sections, version=1):
    """A snapshot state file (snapshot/state.h) of (tag, data) sections."""
    body = b""
    for tag, data in sections:
        body += tag + struct.pack("<IQ", 0, len(data)) + data + b"\0" * (-len(data) % 8)
    head = b"GANTRYST" + struct.pack("<IIQ", version, len(sections), len(body))
    return head + body + struct.pack("<Q", crc64_xz(head + body))


def state_seeds():
    """Snapshot state files (snapshot/state.h), as fuzz_state reads them."""
    regs = struct.pack("<QQQ", 0x1000, 0x8000, 2)
    return {
        "empty": state_file([]),
        "vcpus": state_file([(b"VCPU", regs), (b"VCPU", regs), (b"PIT2", b"abc")]),
        "odd-lengths": state_file([(b"IRQC", bytes(range(13))), (b"CLK0", b""),
                                   (b"SER0", b"\xff" * 9)]),
        "version-2": state_file([(b"VCPU", regs)], version=2),
        "saved-vm": state_file(saved_vm_sections()),
    }


def saved_vm_sections():
    """A saved one-vCPU VM's sections as vmm/vmstate.h, virtio/dev.c and
    vmm/serial.c write them (struct sizes of x86-64 Linux's KVM API), with
    one virtio-rng device whose queue lies in the fuzzer's 64 KiB of RAM."""
    vcpu = [(b"VMPS", struct.pack("<I", 0)), (b"VREG", bytes(144)), (b"VSRG", bytes(312)),
            (b"VXSV", bytes(4096)), (b"VXCR", struct.pack("<II", 1, 0) + bytes(384)),
            (b"VDBG", bytes(128)), (b"VLAP", bytes(1024)), (b"VEVT", bytes(64)),
            (b"VMSR", struct.pack("<IIQ", 0x10, 0, 12345) + struct.pack("<IIQ", 0x1b, 0, 0xfee00900))]
    queue = struct.pack("<QQQHHHHBBBB4x", 0x1000, 0x2000, 0x3000, 64, 5, 5, 4, 1, 0, 1, 1)
    dev = struct.pack("<8IQ", 4, 1, 15, 0, 0, 0, 1, 0, (1 << 32) | (1 << 29)) + queue + \
        bytes(40 * 7)
    return ([(b"VMCF", struct.pack("<IIQ", 1, 2, 512)), (b"CPID", bytes(40 * 4))] + vcpu +
            [(b"PICM", bytes(520)), (b"PICS", struct.pack("<I", 1) + bytes(516)),
             (b"IOAP", struct.pack("<I", 2) + bytes(516)), (b"PIT2", bytes(112)),
             (b"CLCK", bytes(48)), (b"SER0", bytes(8)), (b"VDEV", dev), (b"VCFG", b""), (b"VDEX", b"")])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "corpus")
    for name, seeds in (("virtq", virtq_seeds()), ("mmio", mmio_seeds()),
                        ("layer", layer_seeds()), ("registry_auth", registry_auth_seeds()),
                        ("virtio_net", net_seeds()), ("virtio_fs", fs_seeds()),
                        ("dns", dns_seeds()),
                        ("net_frame", net_frame_seeds()), ("net_policy", net_policy_seeds()),
                        ("net_judge", net_judge_seeds()), ("fuse", fuse_seeds()),
                        ("share_spec", share_spec_seeds()), ("untar", untar_seeds()),
                        ("share_rpc", share_rpc_seeds()), ("secret_spec", secret_spec_seeds()),
                        ("tls_hello", tls_hello_seeds()), ("egress_http", egress_http_seeds()),
                        ("api", api_seeds()), ("files", files_seeds()),
                        ("state", state_seeds())):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for seed, data in sorted(seeds.items()):
            with open(os.path.join(d, seed), "wb") as f:
                f.write(data)
        print(f"{name}: {len(seeds)} seeds in {d}")


if __name__ == "__main__":
    main()
