"""Shared by tests/hostlink and bench/hostlink: the Firecracker hybrid-vsock
stand-in (fake_hybrid_vsock.py) and e2b-hostlink forward as processes."""
import contextlib
import pathlib
import socket
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "relay"))

from harness import free_port, recv_to_eof, stop_process  # noqa: E402
from relay_helpers import wait_port  # noqa: E402

# unshare --fork ignores SIGTERM while it waits, and sh as pid 1 of its pid
# namespace has no handler: SIGKILL (after this) ends it, and --kill-child
# and the pid namespace take every process inside with it.
UNSHARE_STOP = 0.5

FAKE = HERE / "fake_hybrid_vsock.py"


@contextlib.contextmanager
def fake_vmm(uds: pathlib.Path, mapping: dict, user: str = ""):
    """The stand-in VMM socket at UDS; MAPPING: vsock port -> "HOST:PORT" or "unix:PATH";
    USER: run it as that user (what a guest service sees as its unix peer)."""
    argv = ["/usr/bin/python3", str(FAKE), "--uds", str(uds)]
    if user:
        argv = ["setpriv", f"--reuid={user}", "--regid=65534", "--clear-groups", *argv]
    for port, target in mapping.items():
        argv += ["--map", f"{port}={target}"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "ready", f"fake VMM did not start: {line!r} {proc.stderr.read() if proc.poll() is not None else ''}"
        yield uds
    finally:
        stop_process(proc)
        with contextlib.suppress(FileNotFoundError):
            uds.unlink()


# envd listens on 0.0.0.0 and has no bind option, so the real one runs in a
# network (and mount) namespace of its own, with a tmpfs /run for its files;
# socat there publishes its port as a unix socket, which the fake VMM maps
# (unix:PATH), as a guest's envd is reached only through the VMM.
_ENVD_NS = """
ip link set lo up
mount -t tmpfs -o mode=0755 tmpfs /run
"$1" -isnotfc -no-cgroups -port 49983 > "$3" 2>&1 &
socat UNIX-LISTEN:"$2",fork,unlink-early TCP:127.0.0.1:49983 &
wait
"""


@contextlib.contextmanager
def real_envd(workdir: pathlib.Path):
    """The real envd (built from its pinned source, tests/testimages.py) in a
    private network namespace; yields the unix socket that reaches its port."""
    import testimages  # builds envd on first use; the bench does not need it
    sock, log = workdir / "envd.sock", workdir / "envd.log"
    proc = subprocess.Popen(["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", _ENVD_NS,
                             "envd-ns", str(testimages.sources().envd), str(sock), str(log)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _await_envd(proc, sock, log)
        yield sock
    finally:
        stop_process(proc, timeout=UNSHARE_STOP)


def _await_envd(proc, sock: pathlib.Path, log: pathlib.Path, also: pathlib.Path = None):
    """Until envd answers /health 204 through SOCK (and ALSO exists), or its namespace ended."""
    def healthy():
        if not sock.exists() or (also and not also.exists()):
            return False
        try:
            return unix_http_status(sock, "/health") == 204
        except OSError:
            return False
    assert wait_for(lambda: healthy() or proc.poll() is not None, 30) and proc.poll() is None, \
        f"real envd did not answer /health: {log.read_text() if log.exists() else ''}"


# The same in Firecracker mode, as in a guest: envd asks the MMDS on
# 169.254.169.254:80 (a real mmds-serve, on an address of the namespace's own
# lo) for the accessTokenHash its /init checks. envd steps the clock to an
# /init's timestamp when it is more than 50 ms ahead or 5 s behind; a network
# namespace does not separate CLOCK_REALTIME, so envd runs without
# CAP_SYS_TIME (dropped from its bounding set) and this machine's clock stays.
_ENVD_FC_NS = """
ip link set lo up
ip addr add 169.254.169.254/32 dev lo
mount -t tmpfs -o mode=0755 tmpfs /run
"$4" --document "$5" --listen 169.254.169.254:80 --control "$6" > "$3.mmds" 2>&1 &
setpriv --bounding-set -sys_time "$1" -no-cgroups -port 49983 > "$3" 2>&1 &
socat UNIX-LISTEN:"$2",fork,unlink-early TCP:127.0.0.1:49983 &
wait
"""


@contextlib.contextmanager
def real_envd_fc(workdir: pathlib.Path, mmds_serve: str, document: str = '{"instanceID": "template"}'):
    """The real envd in Firecracker mode with a real mmds-serve beside it, in
    a private network namespace; yields (envd's unix socket, mmds-serve's
    control socket: the host API a clone step's document goes to)."""
    import testimages
    sock, ctl, log, doc = (workdir / "envd-fc.sock", workdir / "mmds-control.sock", workdir / "envd-fc.log",
                           workdir / "mmds-document.json")
    doc.write_text(document)
    proc = subprocess.Popen(["unshare", "--net", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c",
                             _ENVD_FC_NS, "envd-fc-ns", str(testimages.sources().envd), str(sock), str(log),
                             mmds_serve, str(doc), str(ctl)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _await_envd(proc, sock, log, also=ctl)
        yield sock, ctl
    finally:
        stop_process(proc, timeout=UNSHARE_STOP)


def unix_http(path: pathlib.Path, method: str, target: str, body: bytes = b"", headers=()) -> tuple:
    """(status, body) of one request through the unix socket PATH."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        head = "".join(f"{k}: {v}\r\n" for k, v in headers)
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                  f"Content-Length: {len(body)}\r\n{head}\r\n".encode() + body)
        answer = recv_to_eof(s)
    head, _, rest = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), rest


def unix_http_status(path: pathlib.Path, target: str) -> int:
    """The status of GET TARGET through the unix socket PATH. ConnectionError
    (an OSError) when the answer has no status line: socat listens on PATH
    before envd listens behind it, and closes a connection made in between
    without a byte."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(path))
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        answer = recv_to_eof(s)
    status = answer.split(b" ", 2)
    if len(status) < 2 or not status[1].isdigit():
        raise ConnectionError(f"{path}: GET {target}: no HTTP status line in {answer[:80]!r}")
    return int(status[1])


@contextlib.contextmanager
def forwarding(hostlink: str, uds: pathlib.Path, guest_port: int, log_path: pathlib.Path, listen_port=None):
    """`e2b-hostlink --uds UDS forward --listen 127.0.0.1:P GUESTPORT`; yields (P, Popen)."""
    port = listen_port or free_port()
    with open(log_path, "w+") as log:
        proc = subprocess.Popen([hostlink, "--uds", str(uds), "forward", "--listen", f"127.0.0.1:{port}",
                                 str(guest_port)], stdout=log, stderr=log, text=True)
        try:
            wait_port(port, proc)
            yield port, proc
        finally:
            stop_process(proc)


def unanswering_socket(path: pathlib.Path) -> socket.socket:
    """A unix listener that accepts (backlog) and never says a word."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(8)
    return s


def http_get(port: int, path: str, timeout=10.0) -> tuple:
    """(status, body) of GET http://127.0.0.1:PORT/PATH with Connection: close."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
        data = recv_to_eof(s)
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


def wait_for(pred, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False
