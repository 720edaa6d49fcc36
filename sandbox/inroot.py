#!/usr/bin/python3
"""File operations on an image's root tree from the build machine, each path
resolved inside that root: openat2(2) with RESOLVE_IN_ROOT, so a symlink in
the tree (absolute, or with `..`) means what it means in the guest and never
reaches a file of the build machine. A base image (builder mode) is hostile
input: os-image/builder_base.py works on its unpacked tree with these
functions, and os-image/mkosi.finalize, which runs outside the image's chroot,
through this command (PYTHONPATH at the checkout's top):

    python3 -m sandbox.inroot ROOT rm PATH...            remove, recursively (rm -rf); the last part may be a glob
    python3 -m sandbox.inroot ROOT empty DIR [KEEP]      remove everything in DIR, dot files too, but KEEP
    python3 -m sandbox.inroot ROOT mkdir PATH...         mkdir -p
    python3 -m sandbox.inroot ROOT chmod MODE PATH       chmod (octal MODE)
    python3 -m sandbox.inroot ROOT cat PATH              the file to stdout
    python3 -m sandbox.inroot ROOT write PATH [EPOCH]    stdin to the file (created or truncated; a symlink there is
                                                         replaced); EPOCH: its times
    python3 -m sandbox.inroot ROOT edit PATH CMD...      the file through CMD (e.g. sed -E …), written back (as write)
    python3 -m sandbox.inroot ROOT prune-links DIR KEEP  remove the symlinks under DIR that lead to no directory, but KEEP
    python3 -m sandbox.inroot ROOT hardlink-if-same A B  B becomes a hard link of A when their bytes are the same

A missing path is no error for rm and empty (like rm -rf), and is for the
others. Exit 0 ok, 1 an operation failed (one message naming the path), 2 usage.
"""
import ctypes
import errno
import fnmatch
import os
import shutil
import stat
import subprocess
import sys

_SYS_OPENAT2 = 437  # x86-64 and the generic table alike
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_IN_ROOT = 0x10
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def open_in(rootfd: int, path: str, flags: int, mode: int = 0o666) -> int:
    """openat2(rootfd, path) with every symlink resolved as if rootfd were
    `/`; raises OSError naming the path."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0,
                   _RESOLVE_IN_ROOT | _RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_long(rootfd), ctypes.c_char_p(os.fsencode(path)),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        if err == 38:  # ENOSYS
            raise OSError(err, "openat2 is not available (Linux 5.6 or newer is needed)", path)
        raise OSError(err, os.strerror(err), path)
    return fd


def split(path: str) -> tuple[str, str]:
    """PATH -> (its directory, its last part); the last part is a name."""
    parent, name = os.path.split(path.strip("/"))
    if name in ("", ".", ".."):
        raise OSError(22, "not a path to a file or directory", path)
    return parent or ".", name


def _lstat(dirfd: int, name: str):
    try:
        return os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def remove_entry(dirfd: int, name: str) -> None:
    """NAME in the directory DIRFD, a directory with everything in it; a
    symlink is removed, not followed."""
    st = _lstat(dirfd, name)
    if st is None:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=dirfd)  # fd-based: follows no symlink
    else:
        os.unlink(name, dir_fd=dirfd)


def open_dir(rootfd: int, path: str, missing_ok: bool = False) -> int | None:
    try:
        return open_in(rootfd, path, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        if missing_ok:
            return None
        raise


def empty(rootfd: int, path: str, keep: str = "") -> None:
    """Every entry of the directory PATH goes, but KEEP; no directory, nothing to do."""
    fd = open_dir(rootfd, path, missing_ok=True)
    if fd is None:
        return
    try:
        for name in sorted(os.listdir(fd)):
            if name != keep:
                remove_entry(fd, name)
    finally:
        os.close(fd)


def remove(rootfd: int, path: str) -> None:
    """rm -rf PATH; its last part may be a shell glob (no dot files for `*`)."""
    parent, pattern = split(path)
    fd = open_dir(rootfd, parent, missing_ok=True)
    if fd is None:
        return
    try:
        if any(c in pattern for c in "*?["):
            names = [n for n in sorted(os.listdir(fd))
                     if fnmatch.fnmatchcase(n, pattern) and (pattern.startswith(".") or not n.startswith("."))]
        else:
            names = [pattern]
        for name in names:
            remove_entry(fd, name)
    finally:
        os.close(fd)


def mkdirs(rootfd: int, path: str) -> None:
    """mkdir -p PATH (mode 0777 less the umask, as mkdir -p)."""
    parts = [p for p in path.split("/") if p]
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        try:
            os.close(open_in(rootfd, sub, os.O_PATH | os.O_DIRECTORY))
            continue
        except FileNotFoundError:
            pass
        parent, name = split(sub)
        fd = open_in(rootfd, parent, os.O_PATH | os.O_DIRECTORY)
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        finally:
            os.close(fd)


def read(rootfd: int, path: str, limit: int = -1) -> bytes:
    """The file's bytes (at most LIMIT of them)."""
    fd = open_in(rootfd, path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as f:
        return f.read(limit)


def open_regular(rootfd: int, path: str) -> int:
    """PATH opened for reading, only if it is a regular file: without
    blocking on a fifo (O_NONBLOCK), never a device. Raises OSError naming it."""
    fd = open_in(rootfd, path, os.O_RDONLY | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", path)
    return fd


def read_regular(rootfd: int, path: str, limit: int) -> bytes:
    """A regular file's bytes (open_regular), refused when larger than LIMIT:
    what the build machine reads of an image is bounded."""
    fd = open_regular(rootfd, path)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
    return data


def write(rootfd: int, path: str, data: bytes, epoch: int | None = None) -> None:
    """PATH becomes a regular file holding DATA: a symlink there is replaced,
    not written through (as sed -i does; /etc/machine-id must be a file)."""
    parent, name = split(path)
    pfd = open_in(rootfd, parent, os.O_PATH | os.O_DIRECTORY)
    try:
        st = _lstat(pfd, name)
        if st and stat.S_ISLNK(st.st_mode):
            os.unlink(name, dir_fd=pfd)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                     dir_fd=pfd)
    finally:
        os.close(pfd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        if epoch is not None:
            os.utime(f.fileno(), (epoch, epoch))


def chmod(rootfd: int, path: str, mode: int) -> None:
    fd = open_in(rootfd, path, os.O_RDONLY)
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def is_dir(rootfd: int, path: str) -> bool:
    try:
        os.close(open_in(rootfd, path, os.O_PATH | os.O_DIRECTORY))
        return True
    except OSError:
        return False


def prune_links(rootfd: int, path: str, keep: str) -> None:
    """find PATH -type l ! -xtype d ! -name KEEP -delete, the links' targets
    resolved inside the root."""
    top = open_dir(rootfd, path)
    try:
        for sub, dirs, files, dirfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
            for name in dirs + files:
                st = _lstat(dirfd, name)
                if (st and stat.S_ISLNK(st.st_mode) and name != keep
                        and not is_dir(rootfd, os.path.normpath(os.path.join(path, sub, name)))):
                    os.unlink(name, dir_fd=dirfd)
    finally:
        os.close(top)


def hardlink_if_same(rootfd: int, a: str, b: str) -> None:
    try:
        same = read(rootfd, a) == read(rootfd, b)
    except FileNotFoundError:
        return
    if not same:
        return
    (pa, na), (pb, nb) = split(a), split(b)
    fa = open_in(rootfd, pa, os.O_PATH | os.O_DIRECTORY)
    fb = open_in(rootfd, pb, os.O_PATH | os.O_DIRECTORY)
    try:
        os.unlink(nb, dir_fd=fb)
        os.link(na, nb, src_dir_fd=fa, dst_dir_fd=fb, follow_symlinks=False)
    finally:
        os.close(fa)
        os.close(fb)


USAGE = __doc__.split("\n\n")[1]


def run(rootfd: int, op: str, args: list[str]) -> None:
    if op == "rm" and args:
        for p in args:
            remove(rootfd, p)
    elif op == "empty" and len(args) in (1, 2):
        empty(rootfd, *args)
    elif op == "mkdir" and args:
        for p in args:
            mkdirs(rootfd, p)
    elif op == "chmod" and len(args) == 2:
        chmod(rootfd, args[1], int(args[0], 8))
    elif op == "cat" and len(args) == 1:
        sys.stdout.buffer.write(read(rootfd, args[0]))
    elif op == "write" and len(args) in (1, 2):
        write(rootfd, args[0], sys.stdin.buffer.read(), int(args[1]) if len(args) == 2 else None)
    elif op == "edit" and len(args) >= 2:
        cp = subprocess.run(args[1:], input=read(rootfd, args[0]), capture_output=True, check=False)
        if cp.returncode != 0:
            raise OSError(5, f"{args[1]} failed ({cp.returncode}): "
                             f"{cp.stderr.decode(errors='replace').strip()}", args[0])
        write(rootfd, args[0], cp.stdout)
    elif op == "prune-links" and len(args) == 2:
        prune_links(rootfd, *args)
    elif op == "hardlink-if-same" and len(args) == 2:
        hardlink_if_same(rootfd, *args)
    else:
        raise ValueError(op)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(f"usage:\n{USAGE}", file=sys.stderr)
        return 2
    root, op, args = argv[0], argv[1], argv[2:]
    try:
        rootfd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        print(f"inroot: root {root}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        run(rootfd, op, args)
    except ValueError:
        print(f"inroot: {op} {' '.join(args)}: not an operation this takes; usage:\n{USAGE}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{root}/{e.filename.lstrip('/')}" if isinstance(e.filename, str) else root
        print(f"inroot: {op} {where}: {e.strerror}", file=sys.stderr)
        return 1
    finally:
        os.close(rootfd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
