#!/usr/bin/python3
"""Run a command where a hostile base image or template cannot reach the build host.

os-image/build.sh runs mkosi through this for builder mode and templates
(sandbox/README.md). mkosi runs what such an input
controls (a base's dpkg and maintainer scripts, a template's build commands)
as root in its own bwrap sandbox, which shares the host's pid namespace: a
root process there reaches the host's files through /proc/PID/root, and may
mknod and mount its disks. Here the command runs instead:

- in a user namespace that maps every id to itself (files keep their real
  owners), so its root has capabilities over its own namespaces only: no
  /proc/PID/root of a host process (ptrace across user namespaces needs the
  host's CAP_SYS_PTRACE), no device nodes, no mounts of block devices, no
  sysctl or host network configuration;
- in a mount namespace whose root holds only: /usr and a few files of /etc
  read-only, the paths given with --bind (read-write) and --ro-bind, those
  given with --overlay (the command may change them, but its changes are
  thrown away when it ends: a shared cache it uses and must not poison),
  fresh /tmp, /var/tmp and /run, a /dev with its harmless nodes, and /proc.
  The mounts are made before the user namespace, so the command can neither
  remount them read-write nor unmount them to see what lies beneath;
- in its own pid, IPC and UTS namespaces.

It keeps the host's network (apt, and a template's build commands, need it):
the build host's loopback services are reachable (template/README.md).

Must run as root (it writes the id maps of the namespace it makes).
Usage: python3 -m sandbox.confine [--bind|--ro-bind|--overlay PATH]... [--chdir DIR] -- CMD...
(PYTHONPATH at the checkout's top; the command runs without it)
"""

import argparse
import ctypes
import errno
import os
import shutil
import signal
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 0x2
SYS_PIVOT_ROOT = 155  # x86_64
PR_SET_PDEATHSIG = 1

# What of the host's /etc the command sees (read-only): name resolution and
# TLS roots. Nothing else: /etc/shadow, ssh keys and the like stay out.
ETC_FILES = ("resolv.conf", "hosts", "nsswitch.conf", "host.conf", "gai.conf",
             "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
             "ssl", "ca-certificates", "ca-certificates.conf", "alternatives",
             "os-release", "debian_version", "mime.types", "protocols", "services")
# The host /proc's group (proc's gid=): members see every process. The one
# gid the user namespace does not map, so no process in it can join.
HIDDEN_GID = 4294967294
DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")

libc = ctypes.CDLL(None, use_errno=True)


class ConfineError(Exception):
    pass


def check(rc, what):
    if rc != 0:
        e = ctypes.get_errno()
        raise ConfineError(f"{what}: {os.strerror(e)}")


def mount(src, dst, fstype, flags, data=None):
    check(libc.mount(src.encode() if src else None, dst.encode(),
                     fstype.encode() if fstype else None, ctypes.c_ulong(flags),
                     data.encode() if data else None),
          f"mount {src or fstype} on {dst}")


def bind(src, dst, ro):
    if os.path.isdir(src) and not os.path.islink(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    mount(src, dst, None, MS_BIND | MS_REC)
    if ro:
        mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def build_root(new, args, scratch):
    """The command's root: a tmpfs with the host's parts it may see."""
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
    bind("/usr", new + "/usr", ro=True)
    for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + d
        if os.path.islink(p):
            os.symlink(os.readlink(p), f"{new}/{d}")
        elif os.path.isdir(p):
            bind(p, f"{new}/{d}", ro=True)
    os.makedirs(new + "/etc")
    for name in ETC_FILES:
        p = "/etc/" + name
        if os.path.islink(p) and not os.path.exists(p):
            continue
        if os.path.exists(p):
            bind(os.path.realpath(p), f"{new}/etc/{name}", ro=True)
    for d, mode in (("tmp", "1777"), ("var/tmp", "1777"), ("run", "0755")):
        os.makedirs(f"{new}/{d}", exist_ok=True)
        mount("tmpfs", f"{new}/{d}", "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode}")
    os.makedirs(new + "/dev")
    mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID, "mode=0755")
    for n in DEV_NODES:
        bind("/dev/" + n, f"{new}/dev/{n}", ro=False)
    for d in ("pts", "shm"):
        os.makedirs(f"{new}/dev/{d}")
    mount("tmpfs", new + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
    os.symlink("/proc/self/fd", new + "/dev/fd")
    for i, n in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{new}/dev/{n}")
    # The host's /proc, which shows the command no host process (hidepid):
    # the kernel lets a user namespace mount a proc for its own pid
    # namespace only where a proc is already fully visible.
    os.makedirs(new + "/proc")
    mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          f"hidepid=invisible,gid={HIDDEN_GID}")
    # Parents before children (a --bind inside a --ro-bind stays writable).
    mounts = sorted([(p, "bind") for p in args.bind] + [(p, "ro-bind") for p in args.ro_bind] +
                    [(p, "overlay") for p in args.overlay], key=lambda m: m[0].split("/"))
    for i, (p, kind) in enumerate(mounts):
        if kind != "overlay":
            bind(p, new + p, ro=kind == "ro-bind")
            continue
        upper, work = f"{scratch}/overlay/{i}/upper", f"{scratch}/overlay/{i}/work"
        os.makedirs(upper)
        os.makedirs(work)
        os.makedirs(new + p, exist_ok=True)
        mount("overlay", new + p, "overlay", MS_NOSUID | MS_NODEV,
              f"lowerdir={p},upperdir={upper},workdir={work},index=off,metacopy=off")


def pivot(new):
    os.chdir(new)
    check(libc.syscall(SYS_PIVOT_ROOT, b".", b"."), f"pivot_root to {new}")
    check(libc.umount2(b".", MNT_DETACH), "detach the host's root")
    os.chdir("/")


def write_maps(pid):
    # Every id to itself, so the image's files keep their owners; but for
    # HIDDEN_GID, which the command therefore cannot take.
    with open(f"/proc/{pid}/uid_map", "w") as f:
        f.write("0 0 4294967295\n")
    with open(f"/proc/{pid}/gid_map", "w") as f:
        f.write(f"0 0 {HIDDEN_GID}\n")


def reap_until(pid):
    """As pid 1 of the namespace: reap children until PID ends; its status.
    Returning ends the namespace: the kernel kills what PID left running
    (a build step's background process cannot outlive the build)."""
    while True:
        try:
            p, st = os.wait()
        except ChildProcessError:
            return 1
        if p == pid:
            status = os.waitstatus_to_exitcode(st)
            return 128 - status if status < 0 else status


def child(args, scratch, to_parent, from_parent):
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    check(libc.unshare(CLONE_NEWNS), "a mount namespace")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    new = scratch + "/root"
    os.mkdir(new)
    build_root(new, args, scratch)
    pivot(new)
    if libc.unshare(CLONE_NEWUSER) != 0:
        e = ctypes.get_errno()
        raise ConfineError(f"a user namespace: {os.strerror(e)} (the build sandbox needs user namespaces: "
                           "sysctl user.max_user_namespaces must not be 0, and no seccomp or LSM policy may "
                           "forbid them)")
    os.write(to_parent, b"u")
    if os.read(from_parent, 1) != b"m":
        raise ConfineError("the id maps were not written (see above)")
    # Mounts copied into a namespace of a user namespace are locked: the
    # command cannot remount the read-only ones or unmount any of them.
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS),
          "mount, pid, IPC and UTS namespaces")
    init = os.fork()
    if init == 0:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        cmd = os.fork()
        if cmd == 0:
            try:
                os.chdir(args.chdir)
                # PYTHONPATH found this package (python3 -m sandbox.confine);
                # the command is not ours to extend.
                os.environ.pop("PYTHONPATH", None)
                os.execvp(args.command[0], args.command)
            except OSError as e:
                print(f"confine: {args.command[0]} (in {args.chdir}): {e.strerror}", file=sys.stderr)
                os._exit(127)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, lambda n, _f: os.kill(cmd, n))
        os._exit(reap_until(cmd))
    _, st = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", action="append", default=[], help="a path the command may change")
    ap.add_argument("--ro-bind", action="append", default=[], help="a path the command may read")
    ap.add_argument("--overlay", action="append", default=[],
                    help="a directory the command may change, its changes thrown away")
    ap.add_argument("--chdir", default="/")
    ap.add_argument("command", nargs="+")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("confine: must run as root (it maps the ids of the namespace it makes)")
    for p in args.bind + args.ro_bind + args.overlay:
        if not os.path.isabs(p) or not os.path.exists(p):
            sys.exit(f"confine: {p}: not an absolute path that exists")
    for p in args.overlay:
        if not os.path.isdir(p):
            sys.exit(f"confine: --overlay {p}: not a directory")
    args.bind = [os.path.realpath(p) for p in args.bind]
    args.ro_bind = [os.path.realpath(p) for p in args.ro_bind]
    args.overlay = [os.path.realpath(p) for p in args.overlay]
    # The root's mount point and the overlays' upper directories: on the
    # host, removed when the command ends.
    scratch = tempfile.mkdtemp(prefix="e2b-confine.", dir=os.environ.get("TMPDIR", "/var/tmp"))
    try:
        rc = run(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(rc)


def run(args, scratch):
    up_r, up_w = os.pipe()
    down_r, down_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(up_r)
        os.close(down_w)
        try:
            child(args, scratch, up_w, down_r)
        except (ConfineError, OSError) as e:
            print(f"confine: {e}", file=sys.stderr)
            os._exit(125)
    os.close(up_w)
    os.close(down_r)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, lambda n, _f: os.kill(pid, n))
    if os.read(up_r, 1) == b"u":
        try:
            write_maps(pid)
            os.write(down_w, b"m")
        except OSError as e:
            print(f"confine: the id maps of process {pid}: {e.strerror}", file=sys.stderr)
    os.close(down_w)
    _, st = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)


if __name__ == "__main__":
    main()
