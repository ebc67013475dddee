"""Write newc cpio archives (the initramfs format) in pure Python.

No root is needed: ownership and device numbers are written into the
archive, not onto the host filesystem. Used by the end-to-end tests and by
bench/boot/run.
"""

import os
import stat

_MAGIC = b"070701"
_TRAILER = "TRAILER!!!"


def _pad4(n):
    return (4 - n % 4) % 4


class Archive:
    """Entries in the order added; write() appends the trailer."""

    def __init__(self):
        self._entries = []

    def add_dir(self, name, mode=0o755):
        self._entries.append((name, stat.S_IFDIR | mode, b"", 0, 0))

    def add_file(self, name, data, mode=0o644):
        self._entries.append((name, stat.S_IFREG | mode, bytes(data), 0, 0))

    def add_char(self, name, major, minor, mode=0o600):
        self._entries.append((name, stat.S_IFCHR | mode, b"", major, minor))

    def to_bytes(self):
        out = bytearray()
        entries = self._entries + [(_TRAILER, 0, b"", 0, 0)]
        for ino, (name, mode, data, major, minor) in enumerate(entries, start=1):
            raw = name.encode() + b"\0"
            nlink = 2 if stat.S_ISDIR(mode) else 1
            fields = (
                ino if name != _TRAILER else 0,
                mode,
                0,  # uid
                0,  # gid
                nlink if name != _TRAILER else 1,
                0,  # mtime: archives are reproducible
                len(data),
                0,  # devmajor
                0,  # devminor
                major,  # rdevmajor
                minor,  # rdevminor
                len(raw),
                0,  # check
            )
            out += _MAGIC + b"".join(b"%08X" % f for f in fields)
            out += raw + b"\0" * _pad4(len(_MAGIC) + 13 * 8 + len(raw))
            out += data + b"\0" * _pad4(len(data))
        return bytes(out)

    def write(self, path):
        with open(path, "wb") as f:
            f.write(self.to_bytes())


def write_initramfs(path, init):
    """An initramfs whose /init is the static program `init`, with the
    mount points it needs and dev/console, so that the kernel opens the
    console as init's stdin, stdout and stderr."""
    with open(init, "rb") as f:
        init_data = f.read()
    a = Archive()
    for d in ("dev", "proc", "sys"):
        a.add_dir(d)
    a.add_char("dev/console", 5, 1)
    a.add_file("init", init_data, mode=0o755)
    a.write(path)
    return path


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: cpio.py OUT.cpio INIT")
    write_initramfs(sys.argv[1], sys.argv[2])
    print(os.path.abspath(sys.argv[1]))
