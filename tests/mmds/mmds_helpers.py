"""Helpers for the mmds-serve tests: a network namespace with
169.254.169.254/32 on its lo, the server running in it, and ways to reach
it from this process (sockets opened inside the namespace)."""
import itertools
import json
import os
import pathlib
import signal
import socket
import subprocess
import tempfile
import time

from harness import assert_no_sanitizer_report
from netns import Netns

MMDS_IP = "169.254.169.254"
_counter = itertools.count()


class MmdsNetns(Netns):
    """A namespace (tests/netns.py) with the MMDS address on its lo."""

    def __init__(self):
        super().__init__("mmds")
        try:
            self.ip("addr", "add", f"{MMDS_IP}/32", "dev", "lo")
        except BaseException:
            self.close()
            raise

    def connect(self, port=80, timeout=5.0):
        with self.entered():
            s = socket.create_connection((MMDS_IP, port), timeout=timeout)
        return s


class Server:
    """mmds-serve (one build variant) running in a namespace."""

    def __init__(self, tools, netns, workdir: pathlib.Path, *args, document=None, wait=True):
        self.netns = netns
        self.dir = workdir
        self.doc_dir = workdir / "doc"
        self.doc_dir.mkdir(exist_ok=True)
        self.document = self.doc_dir / "document.json"
        self.control = workdir / "ctl" / "control.sock"
        if document is not None:
            self.write_document(document)
        self.stderr_path = workdir / f"mmds-serve-{next(_counter)}.log"
        self.stderr = open(self.stderr_path, "w+")
        self.argv = [tools.path("mmds-serve"), "--document", self.document, "--control", self.control, *args]
        self.proc = netns.popen(*self.argv, stdout=subprocess.DEVNULL, stderr=self.stderr)
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout=10.0):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"mmds-serve exited {self.proc.returncode}: {self.log()}")
            try:
                self.netns.connect(timeout=0.5).close()
                if self.control.exists():
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError(f"mmds-serve not ready: {self.log()}")

    def log(self) -> str:
        if not self.stderr.closed:
            self.stderr.flush()
        return self.stderr_path.read_text()

    def write_document(self, doc, raw=None):
        """Writer as the README says: a uniquely named temp file in the same
        directory, renamed over."""
        fd, tmp = tempfile.mkstemp(prefix=".document.json.", dir=self.doc_dir)
        with os.fdopen(fd, "w") as f:
            f.write(raw if raw is not None else json.dumps(doc))
        os.chmod(tmp, 0o644)
        os.rename(tmp, self.document)

    def stop(self):
        if getattr(self, "_stopped", None):
            return self._stopped
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("mmds-serve ignored SIGTERM")
        out = self.log()
        self.stderr.close()
        cp = subprocess.CompletedProcess(self.argv, self.proc.returncode, "", out)
        self._stopped = cp
        assert_no_sanitizer_report(cp)
        return cp


class NotClosed(AssertionError):
    """The server kept the connection open past the time allowed."""


def http_raw(sock, data: bytes, timeout=5.0) -> bytes:
    """Sends data and reads until the server closes the connection (EOF or
    reset); returns what arrived. Raises NotClosed if the connection is still
    open after timeout seconds: a time-out is never mistaken for a close."""
    if data:
        sock.settimeout(timeout)
        sock.sendall(data)
    chunks = []
    end = time.monotonic() + timeout
    while True:
        left = end - time.monotonic()
        if left <= 0:
            raise NotClosed(f"still open after {timeout} s; got {b''.join(chunks)[:200]!r}")
        sock.settimeout(left)
        try:
            b = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            break
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks)


def read_response(sock, timeout=5.0, buf=b""):
    """Reads exactly one response (Content-Length framed) from sock, after
    what buf already holds; returns (status, headers dict lower-cased, body
    bytes, leftover bytes for the next call)."""
    sock.settimeout(timeout)
    while b"\r\n\r\n" not in buf:
        b = sock.recv(65536)
        if not b:
            raise EOFError(f"closed before a full head: {buf!r}")
        buf += b
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0"))
    while len(rest) < n:
        b = sock.recv(65536)
        if not b:
            raise EOFError("closed in the body")
        rest += b
    return status, headers, rest[:n], rest[n:]
