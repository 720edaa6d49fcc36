#!/usr/bin/python3
"""Run a command where a hostile base image or template cannot reach the build host.

os-image/build.sh runs mkosi through this for builder mode and templates
(sandbox/README.md, which says claim by claim what holds and which test
shows it). mkosi runs what such an input controls (a base's dpkg and
maintainer scripts, a template's build steps) as root in its own bwrap
sandbox, which shares the host's pid namespace and its ids. Here the command
runs instead:

- as an unprivileged id range of the host (sandbox/ids.py): root inside is
  the first id of a slot of /etc/subuid, so the kernel's checks for the
  host's root (writing /proc/sys, /proc/sysrq-trigger, core_pattern) never
  pass, and its capabilities hold over its own namespaces only;
- in a mount namespace whose root (sandbox/mounts.py) holds only /usr and a
  few files of /etc read-only, the paths given with --bind (read-write),
  --ro-bind and --overlay (its changes thrown away when it ends), fresh
  /tmp, /var/tmp and /run, a /dev with null, zero, full, random and urandom
  (and /dev/tty, which is /dev/null), and /proc. Every host path is id-mapped, so the image's files
  keep their owners. The mounts are made by the host's root before the
  command's user namespace is entered, so the kernel locks them: the
  read-only ones cannot be remounted writable, none can be unmounted;
- in its own network namespace, owned by the host's root, whose one way out
  is slirp4netns, filtered there (sandbox/egress.py): no host loopback, no
  169.254.0.0/16, none of the host's addresses; --network none: loopback only;
- in its own pid, IPC and UTS namespaces, in a session of its own with no
  terminal (stdin is /dev/null; a terminal on stdout or stderr is reached
  only through termsafe's escaping), with no descriptor of the caller's but
  those three, and an environment of PATH, HOME, LANG, LC_ALL, TERM, TZ,
  SOURCE_DATE_EPOCH and what --setenv gives: the caller's secrets
  (REGISTRY_PASSWORD, AWS_SECRET_ACCESS_KEY, ...) are in no process of it.

Must run as root (it makes the mounts and the id maps).
Usage: python3 -m sandbox.confine [--bind|--ro-bind|--overlay PATH]... [--setenv NAME=VALUE]...
           [--network slirp|none] [--deny CIDR]... [--chdir DIR] -- CMD...
"""

import argparse
import os
import shutil
import signal
import sys
import tempfile

from sandbox import egress, ids, mounts, termsafe

KEEP_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "SOURCE_DATE_EPOCH")
CLEAN_MARK = "E2B_SANDBOX_CLEAN_ENV"
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
# What of the host's /etc the command sees (read-only): name resolution and
# TLS roots. Nothing else: /etc/shadow, ssh keys and the like stay out.
ETC_FILES = ("hosts", "nsswitch.conf", "host.conf", "gai.conf",
             "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group",
             "ssl", "ca-certificates", "ca-certificates.conf", "alternatives",
             "os-release", "debian_version", "mime.types", "protocols", "services")
# The host /proc's group (proc's gid=): members see every process. Outside
# every slot, so no process inside can hold it.
HIDDEN_GID = 4294967294
DEV_NODES = ("null", "zero", "full", "random", "urandom")
PR_SET_PDEATHSIG = 1


class ConfineError(Exception):
    pass


def clean_environment(setenv):
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env.update(setenv)
    return env


def build_root(new, args, scratch, userns_fd, owner):
    """The command's root: a tmpfs with the host's parts it may see."""
    mounts.tmpfs(new, "0755", owner)
    mounts.idmapped("/usr", new + "/usr", userns_fd, ro=True)
    for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        p = "/" + d
        if os.path.islink(p):
            os.symlink(os.readlink(p), f"{new}/{d}")
        elif os.path.isdir(p):
            mounts.idmapped(p, f"{new}/{d}", userns_fd, ro=True)
    os.makedirs(new + "/etc")
    etc = {name: "/etc/" + name for name in ETC_FILES}
    etc["resolv.conf"] = "/etc/resolv.conf"
    if args.network == "slirp":
        with open(f"{scratch}/resolv.conf", "w") as f:
            f.write(egress.RESOLV_CONF)
        etc["resolv.conf"] = f"{scratch}/resolv.conf"
    for name, p in etc.items():
        if os.path.exists(p):
            mounts.idmapped(os.path.realpath(p), f"{new}/etc/{name}", userns_fd, ro=True)
    for d, mode in (("tmp", "1777"), ("var/tmp", "1777"), ("run", "0755")):
        mounts.tmpfs(f"{new}/{d}", mode, owner)
    mounts.tmpfs(new + "/dev", "0755", owner, mounts.MS_NOSUID)
    for n in DEV_NODES:
        mounts.bind("/dev/" + n, f"{new}/dev/{n}")
    # mkosi's bwrap binds /dev/tty into every sandbox it makes, so it must
    # exist: it is /dev/null here, never a terminal (the command has none).
    mounts.bind("/dev/null", f"{new}/dev/tty")
    os.makedirs(f"{new}/dev/pts")
    mounts.tmpfs(new + "/dev/shm", "1777", owner)
    os.symlink("/proc/self/fd", new + "/dev/fd")
    for i, n in enumerate(("stdin", "stdout", "stderr")):
        os.symlink(f"/proc/self/fd/{i}", f"{new}/dev/{n}")
    # The host's /proc, which shows the command no host process (hidepid):
    # the kernel lets a user namespace mount a proc for its own pid
    # namespace only where a proc is already fully visible.
    os.makedirs(new + "/proc")
    mounts.mount("proc", new + "/proc", "proc", mounts.MS_NOSUID | mounts.MS_NODEV | mounts.MS_NOEXEC,
                 f"hidepid=invisible,gid={HIDDEN_GID}")
    # Parents before children (a --bind inside a --ro-bind stays writable).
    # An overlay's lower layer waits, id-mapped and read-only, under
    # /.confine for the overlay mount made inside (mounted(), below).
    order = sorted([(p, "bind") for p in args.bind] + [(p, "ro-bind") for p in args.ro_bind] +
                   [(p, "overlay") for p in args.overlay], key=lambda m: m[0].split("/"))
    overlays = []
    for i, (p, kind) in enumerate(order):
        if kind != "overlay":
            mounts.idmapped(p, new + p, userns_fd, ro=kind == "ro-bind")
            continue
        lower, layers = f"/.confine/lower/{i}", f"/.confine/layers/{i}"
        mounts.idmapped(p, new + lower, userns_fd, ro=True)
        host_layers = f"{scratch}/layers/{i}"
        for d in ("", "/upper", "/work"):
            os.makedirs(host_layers + d, exist_ok=True)
            os.chown(host_layers + d, *owner)
        mounts.bind(host_layers, new + layers)
        os.makedirs(new + p, exist_ok=True)
        overlays.append((lower, f"{layers}/upper", f"{layers}/work", p))
    return overlays


def enter_userns(userns_fd):
    """Root of the slot's user namespace: the host's unprivileged ids."""
    if mounts.libc.setns(userns_fd, mounts.CLONE_NEWUSER) != 0:
        mounts.check(-1, "entering the sandbox's user namespace")
    os.setresgid(0, 0, 0)
    os.setgroups([])
    os.setresuid(0, 0, 0)


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


def child(args, env, scratch, userns_fd, owner, to_parent, from_parent, out_fd):
    mounts.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if out_fd is not None:
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.close(out_fd)
    mounts.private_namespace(CLONE_NEWNET)
    os.write(to_parent, b"n")
    if os.read(from_parent, 1) != b"g":
        raise ConfineError("the sandbox's network was not set up (see above)")
    if args.network == "slirp":
        egress.apply_rules(egress.ruleset(args.deny))
    else:
        egress.loopback_up()
    new = scratch + "/root"
    os.mkdir(new)
    overlays = build_root(new, args, scratch, userns_fd, owner)
    mounts.pivot(new)
    enter_userns(userns_fd)
    # Mounts copied into a namespace of a user namespace are locked: the
    # command cannot remount the read-only ones or unmount any of them.
    mounts.private_namespace(CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS)
    for lower, upper, work, dst in overlays:
        mounts.overlay(lower, upper, work, dst)
    # The id map, the pipes to the parent, the slot's lock: not the command's
    # (through /proc/1/fd, a descriptor of the host is a way to its files).
    close_inherited()
    init = os.fork()
    if init == 0:
        mounts.libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        mounts.mount("proc", "/proc", "proc", mounts.MS_NOSUID | mounts.MS_NODEV | mounts.MS_NOEXEC)
        cmd = os.fork()
        if cmd == 0:
            try:
                os.chdir(args.chdir)
                os.execvpe(args.command[0], args.command, env)
            except OSError as e:
                print(f"confine: {args.command[0]} (in {args.chdir}): {e.strerror}", file=sys.stderr)
                os._exit(127)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, lambda n, _f: os.kill(cmd, n))
        os._exit(reap_until(cmd))
    _, st = os.waitpid(init, 0)
    os._exit(os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))


def make_userns(owner):
    """A user namespace mapping 0..65535 to the slot (OWNER's ids): the
    id-mapped mounts' mapping, and the one the command runs in. Its fd."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ok = mounts.libc.unshare(mounts.CLONE_NEWUSER) == 0
        os.write(w, b"u" if ok else b"x")
        signal.pause()
        os._exit(0)
    os.close(w)
    try:
        if os.read(r, 1) != b"u":
            raise ConfineError("a user namespace could not be made (the build sandbox needs user namespaces: "
                               "sysctl user.max_user_namespaces must not be 0, and no seccomp or LSM policy "
                               "may forbid them)")
        for kind, start in (("uid", owner[0]), ("gid", owner[1])):
            with open(f"/proc/{pid}/{kind}_map", "w") as f:
                f.write(f"0 {start} {ids.SLOT}\n")
        return os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    finally:
        os.close(r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def relay(src_fd, dst_fd):
    """What the command prints, escaped, to the terminal it must not hold."""
    with os.fdopen(src_fd, "rb") as src:
        for line in src:
            os.write(dst_fd, termsafe.escape(line.rstrip(b"\n"), keep_tabs=True).encode() + b"\n")


def run(args, env, scratch):
    slot = ids.Slot()
    owner = (slot.uid, slot.gid)
    slirp = None
    try:
        userns_fd = make_userns(owner)
        os.set_inheritable(userns_fd, True)
        up_r, up_w = os.pipe()
        down_r, down_w = os.pipe()
        out_r = out_w = None
        if os.isatty(1) or os.isatty(2):
            out_r, out_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(up_r)
            os.close(down_w)
            if out_r is not None:
                os.close(out_r)
            try:
                child(args, env, scratch, userns_fd, owner, up_w, down_r, out_w)
            except (ConfineError, mounts.MountError, egress.EgressError, OSError) as e:
                print(f"confine: {e}", file=sys.stderr)
                os._exit(125)
        for fd in (up_w, down_r, userns_fd) + ((out_w,) if out_w is not None else ()):
            os.close(fd)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, lambda n, _f: os.kill(pid, n))
        if os.read(up_r, 1) == b"n":
            try:
                if args.network == "slirp":
                    slirp = egress.Slirp(pid)
                os.write(down_w, b"g")
            except egress.EgressError as e:
                print(f"confine: {e}", file=sys.stderr)
        os.close(down_w)
        os.close(up_r)
        if out_r is not None:
            relay(out_r, 2 if os.isatty(2) else 1)
        _, st = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st)
    finally:
        if slirp is not None:
            slirp.stop()
        slot.release()


def close_inherited():
    """No descriptor of the caller's but stdin, stdout and stderr."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", action="append", default=[], help="a path the command may change")
    ap.add_argument("--ro-bind", action="append", default=[], help="a path the command may read")
    ap.add_argument("--overlay", action="append", default=[],
                    help="a directory the command may change, its changes thrown away")
    ap.add_argument("--setenv", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable of the command's environment (beyond PATH, HOME, LANG, ...)")
    ap.add_argument("--network", choices=("slirp", "none"), default="slirp",
                    help="slirp: filtered egress through slirp4netns (default); none: loopback only")
    ap.add_argument("--deny", action="append", default=[], metavar="CIDR",
                    help="an IPv4 network the command may not reach, beyond the host's own")
    ap.add_argument("--chdir", default="/")
    ap.add_argument("command", nargs="+")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("confine: must run as root (it makes the sandbox's mounts and id maps)")
    setenv = {}
    for s in args.setenv:
        name, eq, value = s.partition("=")
        if not eq or not name or not name.replace("_", "a").isalnum():
            sys.exit(f"confine: --setenv {termsafe.escape(s)}: not NAME=VALUE")
        setenv[name] = value
    env = clean_environment(setenv)
    # Every process of the sandbox is a fork of this one and shows its
    # environment in /proc/PID/environ: so this one must hold no more than
    # the command may see, from its exec on.
    # (PYTHONPATH, which found this package, is no secret; the command runs without it.)
    if os.environ.get(CLEAN_MARK) != "1" or set(os.environ) - set(env) - {CLEAN_MARK, "PYTHONPATH"}:
        close_inherited()
        top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        os.execve(sys.executable, [sys.executable, "-m", "sandbox.confine", *sys.argv[1:]],
                  {**env, CLEAN_MARK: "1", "PYTHONPATH": top})
    close_inherited()
    for p in args.bind + args.ro_bind + args.overlay:
        if not os.path.isabs(p) or not os.path.exists(p):
            sys.exit(f"confine: {termsafe.escape(p)}: not an absolute path that exists")
    for p in args.overlay:
        if not os.path.isdir(p):
            sys.exit(f"confine: --overlay {termsafe.escape(p)}: not a directory")
    args.bind = [os.path.realpath(p) for p in args.bind]
    args.ro_bind = [os.path.realpath(p) for p in args.ro_bind]
    args.overlay = [os.path.realpath(p) for p in args.overlay]
    try:
        args.deny = (egress.check_cidrs(args.deny) + egress.host_addresses()) if args.network == "slirp" else []
    except egress.EgressError as e:
        sys.exit(f"confine: {e}")
    # The root's mount point and the overlays' upper directories: on the
    # host, removed when the command ends.
    scratch = tempfile.mkdtemp(prefix="e2b-confine.", dir="/var/tmp")
    try:
        rc = run(args, env, scratch)
    except ids.IdError as e:
        print(f"confine: {e}", file=sys.stderr)
        rc = 125
    except (ConfineError, mounts.MountError, OSError) as e:
        print(f"confine: {e}", file=sys.stderr)
        rc = 125
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()
