"""Seeds for the targets that read files, specs and requests (mkcorpus.py writes them):
fuzz_layer's are tars (python's tarfile, fixed owners and mtimes) and fuzz_untar's the tar
streams a guest makes; fuzz_registry_auth's are response heads and challenges; fuzz_fuse's are
request sequences in the layout fuzz_fuse.c's header gives, fuzz_share_rpc's the worker's
request messages; fuzz_share_spec's are share specs, one or a list, and fuzz_secret_spec's
secret specs and dotenvs; fuzz_api's are API requests, fuzz_files's the file helper's records
and fuzz_state's snapshot state files.
"""
import base64
import gzip
import io
import struct
import tarfile


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

    def table(exports, nodes, handles, hub=1):
        t = struct.pack("<IIIIIQQQ", 0x4e534647, 1, len(exports), len(nodes), len(handles), hub,
                        16, 4)
        for root, tag in exports:
            t += struct.pack("<QQB", root, 1, len(tag)) + tag
        for nid, exp, path in nodes:
            t += struct.pack("<QQQQQQIBH", nid, 1, 0, 0, 0, 0, 0o100000, exp, len(path)) + path
        for fh, nid, flags in handles:
            t += struct.pack("<QQi", fh, nid, flags)
        return b"\2" + t

    s["carry"] = table([(2, b"rw"), (3, b"ro")],
                       [(4, 0, b"f"), (5, 0, b"d/x"), (6, 1, b"link"), (7, 0, b"d")],
                       [((1 << 32) | 1, 4, 2), ((2 << 32) | 2, 7, 0), ((3 << 32) | 3, 1, 0)])
    s["carry-escape"] = table([(2, b"rw")], [(4, 0, b"../../etc/passwd"), (5, 0, b"link/x"),
                                             (6, 0, b"./f"), (1 << 48 | 9, 0, b"f")], [])
    s["carry-dup"] = table([(2, b"rw"), (2, b"ro"), (3, b"nope")], [(3, 1, b"f"), (3, 0, b"f")],
                           [(1, 3, 0), (1, 3, 0)])
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
