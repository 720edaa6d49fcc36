#!/usr/bin/python3
"""Rewrite a Java JKS keystore deterministically (the image's Java trust store).

    java-cacerts.py [--root ROOT] PATH

Debian's ca-certificates-java (trixie: 20240118) writes /etc/ssl/certs/java/cacerts
at install time with KeyStore.getInstance("JKS"); every entry carries the time it
was added and the entries come out in hash-table order, so two builds differ.
This rewrites the file with every entry's date set to SOURCE_DATE_EPOCH (required,
in the environment), the entries sorted by alias, and the integrity digest
recomputed (SHA-1 over the password "changeit" as UTF-16BE, "Mighty Aphrodite",
then the content). The file must be a JKS (version 2) keystore whose digest
verifies with "changeit": anything else (bad magic, a truncated file, an unknown
entry tag, trailing bytes, a wrong digest) is refused with the file and the offset,
and the file is left as it was.

With --root, PATH is resolved inside ROOT as the guest would resolve it
(sandbox/inroot.py: openat2 RESOLVE_IN_ROOT; PYTHONPATH names the checkout's
top), for use on an image's tree from the build machine. The file itself is
never followed if it is a symlink, must be a regular file, and is replaced
through a temporary file and a rename in its own directory, keeping its mode
and owner. Exit 0 done, 1 refused, 2 usage.
"""
import errno
import hashlib
import os
import stat
import struct
import sys

MAGIC = 0xFEEDFEED
VERSION = 2
TAG_PRIVATE_KEY, TAG_TRUSTED_CERT = 1, 2
PASSWORD = "changeit"
DIGEST_SALT = b"Mighty Aphrodite"
DIGEST_LEN = 20
MAX_SIZE = 64 << 20  # a trust store is ~200 KiB; refuse anything absurd before reading it


class Refused(Exception):
    """The keystore cannot be rewritten; the message names the offset."""


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise Refused(f"offset {self.pos}: truncated: {what} needs {n} bytes, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u16(self, what):
        return struct.unpack(">H", self.take(2, what))[0]

    def u32(self, what):
        return struct.unpack(">I", self.take(4, what))[0]

    def utf(self, what):
        """Java's DataOutput.writeUTF: a 2-byte length, then the bytes (kept raw)."""
        return self.take(self.u16(what + " length"), what)

    def blob(self, what):
        return self.take(self.u32(what + " length"), what)


def digest(body):
    return hashlib.sha1(PASSWORD.encode("utf-16-be") + DIGEST_SALT + body).digest()


def read_cert(r):
    """(type, encoded) of one certificate; version 2 names its type."""
    at = r.pos
    ctype = r.utf("certificate type")
    if ctype != b"X.509":
        raise Refused(f"offset {at}: certificate type {ctype[:32]!r} is not X.509")
    return ctype, r.blob("certificate")


def parse(data):
    """[(alias, tag, payload-bytes-after-the-date)] of a JKS v2 keystore whose
    digest verifies; payloads are kept byte for byte."""
    r = Reader(data)
    magic = r.u32("magic")
    if magic != MAGIC:
        raise Refused(f"offset 0: magic {magic:#010x} is not a JKS keystore's {MAGIC:#010x}"
                      + (" (PKCS12? this handles JKS only)" if data[:1] == b"\x30" else ""))
    version = r.u32("version")
    if version != VERSION:
        raise Refused(f"offset 4: JKS version {version}, only {VERSION} is handled")
    count = r.u32("entry count")
    entries, seen = [], set()
    for i in range(count):
        at = r.pos
        tag = r.u32(f"entry {i} tag")
        if tag not in (TAG_PRIVATE_KEY, TAG_TRUSTED_CERT):
            raise Refused(f"offset {at}: entry {i}: unknown tag {tag} (1 private key, 2 trusted certificate)")
        alias = r.utf(f"entry {i} alias")
        if alias in seen:
            raise Refused(f"offset {at}: entry {i}: alias {alias[:64]!r} appears twice")
        seen.add(alias)
        r.take(8, f"entry {i} date")
        start = r.pos
        if tag == TAG_PRIVATE_KEY:
            r.blob(f"entry {i} key")
            for j in range(r.u32(f"entry {i} chain length")):
                read_cert(r)
        else:
            read_cert(r)
        entries.append((alias, tag, data[start:r.pos]))
    body_end = r.pos
    stored = r.take(DIGEST_LEN, "integrity digest")
    if r.pos != len(data):
        raise Refused(f"offset {r.pos}: {len(data) - r.pos} bytes after the integrity digest")
    if stored != digest(data[:body_end]):
        raise Refused(f"offset {body_end}: the integrity digest does not match (damaged, or its password is not {PASSWORD!r})")
    return entries


def render(entries, date_ms):
    out = [struct.pack(">III", MAGIC, VERSION, len(entries))]
    for alias, tag, payload in sorted(entries, key=lambda e: e[0]):
        out.append(struct.pack(">IH", tag, len(alias)) + alias + struct.pack(">q", date_ms) + payload)
    body = b"".join(out)
    return body + digest(body)


def normalise(data, epoch):
    return render(parse(data), epoch * 1000)


def source_date_epoch():
    value = os.environ.get("SOURCE_DATE_EPOCH", "")
    if not value.isascii() or not value.isdigit():
        raise Refused(f"SOURCE_DATE_EPOCH={value!r}: set it to the build's time in seconds since 1970")
    return int(value)


def open_parent(root, path):
    """(directory fd, name) of PATH; with ROOT, resolved inside it."""
    parent, name = os.path.split(path.rstrip("/"))
    if name in ("", ".", ".."):
        raise Refused("not a path to a file")
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    if root is None:
        return os.open(parent or ".", flags), name
    from sandbox import inroot  # sandbox/inroot.py: openat2 RESOLVE_IN_ROOT (PYTHONPATH: the checkout)
    rootfd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return inroot.open_in(rootfd, parent or "/", flags), name
    finally:
        os.close(rootfd)


def rewrite(root, path, epoch):
    dirfd, name = open_parent(root, path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise Refused("not a regular file")
            if st.st_size > MAX_SIZE:
                raise Refused(f"{st.st_size} bytes: too large for a trust store")
            data = f.read(MAX_SIZE + 1)
        new = normalise(data, epoch)
        tmp = f".{name}.java-cacerts.{os.getpid()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(new)
                os.fchown(f.fileno(), st.st_uid, st.st_gid)
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
                f.flush()  # before the times: a later write would set them again
                os.utime(f.fileno(), ns=(epoch * 10**9, epoch * 10**9))
                os.fsync(f.fileno())
            os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dirfd)
            except OSError:
                pass
            raise
        return len(parse(new))
    finally:
        os.close(dirfd)


def main(argv):
    root = None
    if argv[:1] == ["--root"] and len(argv) >= 2:
        root, argv = argv[1], argv[2:]
    if len(argv) != 1 or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    path = argv[0]
    shown = f"{root.rstrip('/')}/{path.lstrip('/')}" if root else path
    try:
        epoch = source_date_epoch()
        count = rewrite(root, path, epoch)
    except Refused as e:
        print(f"java-cacerts: {shown}: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        why = "a symbolic link, not followed" if e.errno == errno.ELOOP else e.strerror or e
        print(f"java-cacerts: {shown}: {why}", file=sys.stderr)
        return 1
    print(f"java-cacerts: {shown}: {count} entries, dated {epoch}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
