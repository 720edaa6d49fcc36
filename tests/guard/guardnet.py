"""Network-namespace fixtures for the envd-guard tests: a "guest" and a
"peer" namespace joined by a veth pair, listeners in the guest, and TCP
probes that tell a dropped connection (timeout) from a refused one."""
import itertools
import json
import os
import subprocess
import time

PY = "/usr/bin/python3"
GUEST_V4, PEER_V4 = "10.200.0.1", "10.200.0.2"
GUEST_V6, PEER_V6 = "fd00:e2b:0:1::1", "fd00:e2b:0:1::2"
ALIAS = "169.254.169.254"
_counter = itertools.count()

LISTENER = r"""
import socket, sys, threading
socks = []
for spec in sys.argv[1:]:
    host, port = spec.rsplit(":", 1)
    if host == "::":
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_IP, 15, 1)  # IP_FREEBIND, as mmds.socket does
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(64)
    socks.append(s)
def serve(s):
    while True:
        c, _ = s.accept()
        c.close()
for s in socks:
    threading.Thread(target=serve, args=(s,), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""

PROBE = r"""
import json, socket, sys, threading
timeout = float(sys.argv[1])
results = {}
def probe(target):
    host, port = target.rsplit(":", 1)
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect((host.strip("[]"), int(port)))
        results[target] = "connected"
    except socket.timeout:
        results[target] = "timeout"
    except ConnectionRefusedError:
        results[target] = "refused"
    except OSError as e:
        results[target] = "error:" + e.strerror
    finally:
        s.close()
threads = [threading.Thread(target=probe, args=(t,)) for t in sys.argv[2:]]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(results))
"""


def sh(*args, check=True, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 60)
    cp = subprocess.run([str(a) for a in args], **kw)
    if check and cp.returncode != 0:
        raise AssertionError(f"{args!r} failed ({cp.returncode}):\n{cp.stdout}\n{cp.stderr}")
    return cp


class NetPair:
    """guest <-veth-> peer, both with lo up. Always call close()."""

    def __init__(self, with_peer=True):
        n = next(_counter)
        self.guest = f"e2bt-guard-{os.getpid()}-{n}-g"
        self.peer = f"e2bt-guard-{os.getpid()}-{n}-p" if with_peer else None
        self.procs = []
        self.created = []
        try:
            self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self):
        for ns in filter(None, (self.guest, self.peer)):
            sh("ip", "netns", "add", ns)
            self.created.append(ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        if not self.peer:
            return
        sh("ip", "-n", self.guest, "link", "add", "veth0", "type", "veth", "peer", "name", "veth0", "netns", self.peer)
        for ns, v4, v6 in ((self.guest, GUEST_V4, GUEST_V6), (self.peer, PEER_V4, PEER_V6)):
            sh("ip", "-n", ns, "addr", "add", f"{v4}/24", "dev", "veth0")
            sh("ip", "-n", ns, "addr", "add", f"{v6}/64", "dev", "veth0", "nodad")
            sh("ip", "-n", ns, "link", "set", "veth0", "up")
        # The peer sends traffic for the MMDS address straight at the guest.
        sh("ip", "-n", self.peer, "route", "add", f"{ALIAS}/32", "via", GUEST_V4)
        self._wait_for_link()

    def _wait_for_link(self):
        deadline = time.monotonic() + 10
        # A refused connection to a closed port proves the path both ways.
        targets = (f"{GUEST_V4}:9", f"[{GUEST_V6}]:9")
        while time.monotonic() < deadline:
            if set(self.probe(self.peer, *targets, timeout=1).values()) == {"refused"}:
                return
            time.sleep(0.1)
        raise AssertionError("veth between guest and peer never came up")

    def run(self, ns, *args, check=False, **kw):
        return sh("ip", "netns", "exec", ns, *args, check=check, **kw)

    def nft(self, *args, check=True):
        return self.run(self.guest, "nft", *args, check=check)

    def listen(self, *specs):
        """Starts listeners in the guest on "host:port" specs; "::" is dual-stack."""
        p = subprocess.Popen(["ip", "netns", "exec", self.guest, PY, "-c", LISTENER, *specs],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise AssertionError(f"listener failed: {p.stderr.read()}")
        return p

    def probe(self, ns, *targets, timeout=1.5):
        cp = self.run(ns, PY, "-c", PROBE, str(timeout), *targets, check=True)
        return json.loads(cp.stdout)

    def close(self):
        for p in self.procs:
            try:
                p.stdin.close()
            except OSError:
                pass
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs = []
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self.created = []
