"""Seeds for the virtio targets: fuzz_virtq, fuzz_mmio, fuzz_virtio_net and fuzz_virtio_fs
(mkcorpus.py writes them).

The layouts mirror the headers of fuzz_virtq.c, fuzz_mmio.c, fuzz_virtio_net.c and
fuzz_virtio_fs.c: change them together.
"""
import struct


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
