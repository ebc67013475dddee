"""Seeds for the network worker's targets (mkcorpus.py writes them): fuzz_net_frame's are a mode
byte and an Ethernet frame from the guest; fuzz_dns's are guest queries and (query, upstream
answer) pairs, as fuzz_dns.c reads them; fuzz_net_policy's are policy documents and
fuzz_net_judge's binary policies and destinations, as its header lays them out; fuzz_tls_hello's
are ClientHello records; fuzz_egress_http's are the guest's request streams.
"""
import base64
import struct


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
