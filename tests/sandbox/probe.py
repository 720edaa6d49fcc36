"""What a hostile build step tries, as root inside the build sandbox (issue
49): the host's ids, sysctl and sysrq, the caller's environment, terminal
and descriptors, files outside its mounts, the host's network. It records
each attempt, never acts on what it reaches (an opened sysctl is closed
unwritten, a terminal gets no keystroke but the marker), and writes one JSON
object: {"uid_map": TEXT, "reached": [what it got to], "tried": N}.

Standard library only: it runs with the host's python3 (through
sandbox/confine.py directly) and with an image's own (a template's step,
after `apt-get install python3`).

    probe.py --out FILE [--secret TOKEN] [--path P]... [--tcp HOST:PORT]...
             [--abstract NAME] [--fd-write NAME --fd-target PATH] [--tiocsti TEXT]
"""
import argparse
import ctypes
import fcntl
import json
import os
import socket
import termios

SYSCTLS = ("kernel/core_pattern", "vm/drop_caches", "kernel/randomize_va_space", "net/ipv4/ip_forward",
           "kernel/modprobe")


def writable(path):
    """Opened for writing (closed again, nothing written)?"""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    except OSError:
        return False
    os.close(fd)
    return True


def own_netns():
    """Is this network namespace one the sandbox made (an empty one of its
    own, as mkosi's for steps without network)? Its sysctls are its own."""
    NS_GET_USERNS = 0xB701
    fd = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        owner = fcntl.ioctl(fd, NS_GET_USERNS)
    except OSError:
        return False
    finally:
        os.close(fd)
    try:
        return os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino
    finally:
        os.close(owner)


def fresh_proc():
    """A proc of the sandbox's own mounted where it can see it, if the kernel lets it."""
    libc = ctypes.CDLL(None, use_errno=True)
    d = "/tmp/e2b-probe-proc"
    os.makedirs(d, exist_ok=True)
    return d if libc.mount(b"proc", d.encode(), b"proc", 0, None) == 0 else None


def pids():
    return [p for p in os.listdir("/proc") if p.isdigit()]


def probe(a):
    reached, tried = [], 0

    def attempt(what, ok):
        nonlocal tried
        tried += 1
        if ok:
            reached.append(what)

    fresh = fresh_proc()
    procs = ["/proc"] + ([fresh] if fresh else [])
    for proc in procs:
        for s in SYSCTLS:
            if s.startswith("net/") and own_netns():
                continue
            attempt(f"{proc}/sys/{s} open for writing", writable(f"{proc}/sys/{s}"))
        attempt(f"{proc}/sysrq-trigger open for writing", writable(f"{proc}/sysrq-trigger"))
    if a.secret:
        attempt("the secret in this environment", any(a.secret in v for v in os.environ.values()))
        for pid in pids():
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    attempt(f"the secret in /proc/{pid}/environ", a.secret.encode() in f.read())
            except OSError:
                attempt(f"/proc/{pid}/environ", False)
    for path in a.path:
        for p in [path] + [f"/proc/{pid}/root{path}" for pid in pids()]:
            try:
                with open(p, "rb") as f:
                    f.read(1 << 16)
                attempt(f"read {p}", True)
            except OSError:
                attempt(f"read {p}", False)
    for fd in (0, 1, 2):
        attempt(f"fd {fd} is a terminal", os.isatty(fd))
    ttys = [(f"fd {fd}", fd) for fd in (0, 1, 2)]
    try:
        ttys.append(("/dev/tty", os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)))
        attempt("/dev/tty is a terminal", os.isatty(ttys[-1][1]))
    except OSError:
        attempt("/dev/tty opened", False)
    if a.tiocsti:
        for what, fd in ttys:
            try:
                for ch in a.tiocsti:
                    fcntl.ioctl(fd, termios.TIOCSTI, ch.encode())
                attempt(f"TIOCSTI through {what}", True)
            except OSError:
                attempt(f"TIOCSTI through {what}", False)
    if a.fd_write:
        for pid in pids():
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                attempt(f"/proc/{pid}/fd", False)
                continue
            for n in fds:
                try:  # the caller's descriptor, by the path it names (not the build's own)
                    if os.readlink(f"/proc/{pid}/fd/{n}") != a.fd_target:
                        continue
                except OSError:
                    continue
                target = f"/proc/{pid}/fd/{n}/{a.fd_write}"
                try:
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
                    os.write(fd, b"pwned\n")
                    os.close(fd)
                    attempt(f"wrote {target}", True)
                except OSError:
                    attempt(f"wrote {target}", False)
    for hp in a.tcp:
        host, port = hp.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                attempt(f"tcp {hp}", True)
        except OSError:
            attempt(f"tcp {hp}", False)
    if a.abstract:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\0" + a.abstract)
            attempt(f"abstract socket @{a.abstract}", True)
        except OSError:
            attempt(f"abstract socket @{a.abstract}", False)
        finally:
            s.close()
    with open("/proc/self/uid_map") as f:
        uid_map = f.read()
    return {"uid_map": uid_map, "reached": reached, "tried": tried}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--secret")
    ap.add_argument("--path", action="append", default=[])
    ap.add_argument("--tcp", action="append", default=[])
    ap.add_argument("--abstract")
    ap.add_argument("--fd-write")
    ap.add_argument("--fd-target", help="the path the caller's descriptor names (for --fd-write)")
    ap.add_argument("--tiocsti")
    a = ap.parse_args()
    result = probe(a)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
