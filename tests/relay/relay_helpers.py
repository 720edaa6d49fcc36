"""Shared by tests/relay and tests/hostlink: start a socket-activated relay on
a loopback TCP port (the relay code is transport-agnostic; in the guest the
socket is vsock), small loopback servers, and line-level clients."""
import contextlib
import os
import pathlib
import random
import socket
import subprocess
import threading
import time

from harness import free_port, recv_to_eof, stop_process

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PORTS_H = ROOT / "common" / "vsock_ports.h"


def vsock_ports() -> dict:
    """The C side's port constants (common/vsock_ports.h), by name."""
    out = {}
    for line in PORTS_H.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "#define" and parts[1].startswith("VSOCK_"):
            out[parts[1]] = int(parts[2].rstrip("u"))
    return out


EPHEMERAL_RANGE_FILE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")


def ephemeral_range() -> tuple:
    lo, hi = EPHEMERAL_RANGE_FILE.read_text().split()
    return int(lo), int(hi)


def bind_below_ephemeral(sock: socket.socket) -> int:
    """Binds SOCK to a free 127.0.0.1 port below the kernel's ephemeral range,
    where a user's own server lives (3000, 8080): the dynamic relay refuses
    the ephemeral range. Returns the port."""
    lo = ephemeral_range()[0]
    for _ in range(200):
        port = random.randrange(20000, lo) if lo > 20001 else random.randrange(1024, lo)
        try:
            sock.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
    raise AssertionError(f"no free port below the ephemeral range ({lo})")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (/proc/PID/stat)."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_at_emfile(pid: int, port: int) -> tuple:
    """Lowers PID's RLIMIT_NOFILE to the fds it holds, so its next accept
    fails with EMFILE, connects a client to PORT, and measures the CPU the
    process burns in the next second; then gives the limit back. Returns
    (CPU seconds, the connected client), the caller closes the client."""
    import resource
    time.sleep(0.3)  # the probe of activated()/forwarding() has come and gone: its fds are closed
    nofile = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{pid}/fd")), nofile[1]))
    try:
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
        time.sleep(0.2)
        cpu0 = cpu_seconds(pid)
        time.sleep(1.0)
        return cpu_seconds(pid) - cpu0, client
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, nofile)


def wait_port(port: int, proc=None, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{proc.args[0]} exited {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


@contextlib.contextmanager
def activated(argv, log_path):
    """argv under systemd-socket-activate on 127.0.0.1:<free port> (LISTEN_FDS
    like systemd's .socket units). Yields (port, Popen). Stopped on exit."""
    port = free_port()
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(["systemd-socket-activate", "-l", f"127.0.0.1:{port}", *map(str, argv)],
                                stdout=log, stderr=log, text=True)
        try:
            wait_port(port, proc)
            yield port, proc
        finally:
            stop_process(proc)


class LoopbackServer:
    """A TCP server on 127.0.0.1 standing for a user's own server in the guest
    (on a port below the ephemeral range, like one).
    mode "http": answers GET with a fixed body; "echo-after-eof": reads until
    the client half-closes, then sends back what it got, then closes."""

    def __init__(self, mode="http", body=b"user-server-ok\n"):
        self.mode, self.body = mode, body
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = bind_below_ephemeral(self.sock)
        self.sock.listen(64)
        self.received = []
        self.connections = 0
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        self.connections += 1
        with conn:
            if self.mode == "http":
                data = b""
                while b"\r\n\r\n" not in data:
                    c = conn.recv(4096)
                    if not c:
                        return
                    data += c
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                             % (len(self.body), self.body))
            else:
                data = recv_to_eof(conn)
                self.received.append(data)
                conn.sendall(b"echo:" + data)

    def close(self):
        self.sock.close()


def exchange(port: int, data: bytes, timeout=10.0, half_close=True) -> bytes:
    """Connects, sends, optionally half-closes, reads to EOF."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return recv_to_eof(s, reset_is_eof=True)
