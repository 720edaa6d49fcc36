"""The sandbox's file system: a tmpfs root holding only what the command may
see, every host path in it an id-mapped mount.

An id-mapped mount shows a file the disk says uid U owns as owned by the
sandbox's U: the host's U + the slot's first id (sandbox/ids.py), which is
how root inside, an unprivileged id of the host, still reads and writes the
image's files with their real owners, and how what it writes lands on disk
owned as the image says. Linux 5.12 or newer, on a file system that allows it
(ext4, xfs, btrfs; tmpfs from 6.3); not NFS.
"""
import ctypes
import os

libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
# x86_64 system call numbers.
SYS_PIVOT_ROOT = 155
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_IDMAP = 0x100000


class MountError(Exception):
    pass


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def check(rc, what):
    if rc < 0:
        e = ctypes.get_errno()
        raise MountError(f"{what}: {os.strerror(e)}")
    return rc


def mount(src, dst, fstype, flags, data=None):
    check(libc.mount(src.encode() if src else None, dst.encode(),
                     fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                     data.encode() if data else None),
          f"mount {src or fstype} on {dst}")


def make_point(src, dst):
    """An empty directory or file at DST for SRC to be mounted on."""
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()


def bind(src, dst, ro=False):
    """A plain bind mount (device nodes: their owners do not matter)."""
    make_point(src, dst)
    mount(src, dst, None, MS_BIND | MS_REC)
    if ro:
        mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def idmapped(src, dst, userns_fd, ro=False):
    """SRC at DST, its owners shifted into the sandbox's ids (see above);
    read-only with RO."""
    fd = libc.syscall(SYS_OPEN_TREE, AT_FDCWD, src.encode(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)
    check(fd, f"a copy of the mount of {src}")
    try:
        attr = MountAttr(MOUNT_ATTR_IDMAP | (MOUNT_ATTR_RDONLY if ro else 0), 0, 0, userns_fd)
        if libc.syscall(SYS_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH | AT_RECURSIVE, ctypes.byref(attr),
                        ctypes.sizeof(attr)) < 0:
            e = ctypes.get_errno()
            raise MountError(f"an id-mapped mount of {src}: {os.strerror(e)} (the build sandbox needs Linux 5.12 "
                             "or newer and a file system that allows id-mapped mounts: ext4, xfs, btrfs, tmpfs "
                             "from Linux 6.3; not NFS)")
        make_point(src, dst)
        check(libc.syscall(SYS_MOVE_MOUNT, fd, b"", AT_FDCWD, dst.encode(), MOVE_MOUNT_F_EMPTY_PATH),
              f"mount {src} on {dst}")
    finally:
        os.close(fd)


def tmpfs(dst, mode, owner, flags=MS_NOSUID | MS_NODEV):
    """A fresh tmpfs at DST that root inside owns (OWNER: its host uid, gid)."""
    os.makedirs(dst, exist_ok=True)
    mount("tmpfs", dst, "tmpfs", flags, f"mode={mode},uid={owner[0]},gid={owner[1]}")


def pivot(new):
    os.chdir(new)
    check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), f"pivot_root to {new}")
    check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")


def private_namespace(extra=0):
    """A mount namespace of its own (and EXTRA ones), nothing propagating back."""
    check(libc.unshare(CLONE_NEWNS | extra), "new namespaces")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def overlay(lower, upper, work, dst):
    """An overlay whose changes land in UPPER (thrown away by the caller),
    mounted from inside the user namespace: its own files then belong to
    root inside, and the kernel keeps the lower layer's id mapping."""
    os.makedirs(dst, exist_ok=True)
    mount("overlay", dst, "overlay", MS_NOSUID | MS_NODEV,
          f"lowerdir={lower},upperdir={upper},workdir={work},userxattr")
