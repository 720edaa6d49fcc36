"""Network namespaces for the tests: uniquely named (prefix, pid, counter),
lo up, commands run inside, processes started inside tracked, and all of it
removed by close() (idempotent; fixtures call it in their teardown, so it runs
whether the test passed or failed). Imported as `netns`: tests/ is on sys.path
through conftest.py, like `harness`."""
import contextlib
import ctypes
import itertools
import os
import subprocess

from harness import stop_process

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000
_counter = itertools.count()


def sh(*args, check=True, **kw):
    """subprocess.run with captured text output and a timeout; check=True
    fails with the command's output."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    cp = subprocess.run([str(a) for a in args], **kw)
    if check and cp.returncode != 0:
        raise AssertionError(f"{args!r} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
    return cp


class Netns:
    """A network namespace named e2bt-<prefix>-<pid>-<n>[-<role>], lo up.
    Other helpers run tests on this machine at the same time, hence the pid."""

    def __init__(self, prefix: str, role: str = ""):
        self.name = f"e2bt-{prefix}-{os.getpid()}-{next(_counter)}" + (f"-{role}" if role else "")
        self.procs = []
        self._created = False
        sh("ip", "netns", "add", self.name)
        self._created = True
        try:
            self.ip("link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def __str__(self):
        return self.name

    def ip(self, *args, check=True):
        """`ip -n <name> ...`"""
        return sh("ip", "-n", self.name, *args, check=check)

    def exec_args(self, *argv):
        """The argv that runs argv inside the namespace."""
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def run(self, *argv, check=False, **kw):
        """Runs argv inside the namespace to completion (see sh())."""
        return sh(*self.exec_args(*argv), check=check, **kw)

    def popen(self, *argv, **kw):
        """Starts argv inside the namespace; close() stops it if it still runs."""
        p = subprocess.Popen(self.exec_args(*argv), **kw)
        self.procs.append(p)
        return p

    @contextlib.contextmanager
    def entered(self):
        """Runs the block with this thread in the namespace: sockets made
        there stay there."""
        orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
        try:
            if _libc.setns(target, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns")
            yield
        finally:
            if _libc.setns(orig, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")
            os.close(orig)
            os.close(target)

    def close(self):
        """Stops what popen() started (stdin closed, SIGTERM, SIGKILL after
        5 s), then deletes the namespace. Safe to call twice."""
        procs, self.procs = self.procs, []
        for p in procs:
            if p.stdin:
                try:
                    p.stdin.close()
                except OSError:
                    pass
            stop_process(p, timeout=5)
            for f in (p.stdout, p.stderr):
                if f:
                    f.close()
        if self._created:
            self._created = False
            subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def veth_pair(a: Netns, b: Netns, ifname="veth0"):
    """Joins a and b with a veth pair whose ends are both called ifname
    (down, no addresses: the caller configures them)."""
    a.ip("link", "add", ifname, "type", "veth", "peer", "name", ifname, "netns", b.name)
