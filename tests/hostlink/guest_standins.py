"""TEST STAND-INS for two guest parts, used where the real ones cannot be:

- CloneStepStandIn: the guest's clone step (e2b-clone) on "vsock port
  10053". The real e2b-clone steps CLOCK_REALTIME to the host's, which on
  this machine is the machine's own clock (a namespace does not separate
  it), so `restore` end to end runs against this: it speaks E2B-CLONE/1
  (clone/README.md), checks the request's shape, and does the one part of
  the step that envd's /init depends on: it PUTs the document to a REAL
  mmds-serve's control socket, as e2b-clone does. It does not reseed, step
  the clock, rotate the token key or renew the machine-id. The real one runs
  in the QEMU snapshot test (tests/boot/test_clone_snapshot.py).

- SlowGuest: a whole guest behind a hybrid-vsock socket that answers every
  step (the VMM's OK, the clone step's greeting and answer, an HTTP answer)
  only after `delay` seconds: each step alone is inside a --timeout longer
  than the delay, the command as a whole is not. It must misbehave that
  way, which no real part does on purpose."""
import contextlib
import pathlib
import socket
import threading
import time


def _read_until(conn: socket.socket, end: bytes, limit: int = 1 << 20) -> bytes:
    data = b""
    while end not in data:
        got = conn.recv(1)
        if not got:
            raise ConnectionError(f"closed before {end!r}: {data!r}")
        data += got
        if len(data) > limit:
            raise ConnectionError("request too large")
    return data


def _read_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        got = conn.recv(n - len(data))
        if not got:
            raise ConnectionError("closed inside the body")
        data += got
    return data


def _clone_request(conn: socket.socket) -> tuple:
    """(first line, {field: value}, document bytes) of one E2B-CLONE/1 request."""
    head = _read_until(conn, b"\n\n").decode()
    lines = head[:-2].split("\n")
    fields = dict(line.split(" ", 1) for line in lines[1:])
    document = _read_exact(conn, int(fields["document"])) if "document" in fields else b""
    return lines[0], fields, document


def _http_request(conn: socket.socket) -> tuple:
    """(method, path, headers dict lower-cased, body) of one HTTP/1.1 request."""
    head = _read_until(conn, b"\r\n\r\n").decode()
    first, *lines = head[:-4].split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    body = _read_exact(conn, int(headers.get("content-length", "0")))
    method, path, _ = first.split(" ", 2)
    return method, path, headers, body


class _Server:
    def __init__(self, path: pathlib.Path):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(16)
        self.errors = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_safely, args=(conn,), daemon=True).start()

    def _serve_safely(self, conn):
        with conn:
            try:
                conn.settimeout(30)
                self.serve(conn)
            except OSError as e:  # the client gave up (its deadline): expected in the slow cases
                self.errors.append(repr(e))

    def close(self):
        self.listener.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


class CloneStepStandIn(_Server):
    """Maps as "unix:PATH" for vsock port 10053 (fake_hybrid_vsock.py)."""

    def __init__(self, path: pathlib.Path, mmds_control: pathlib.Path):
        self.control = mmds_control
        self.requests = []
        super().__init__(path)

    def serve(self, conn):
        conn.sendall(b"E2B-CLONE/1 ready\n")
        first, fields, document = _clone_request(conn)
        received = time.time()
        self.requests.append((first, fields, document, received))
        if first != "E2B-CLONE/1 clone":
            conn.sendall(b"ERR the stand-in takes clone requests only\n")
            return
        assert len(fields["entropy"]) >= 64 and set(fields["entropy"]) <= set("0123456789abcdef"), fields
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as ctl:
            ctl.connect(str(self.control))
            ctl.sendall(b"PUT /mmds HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(document) + document)
            status = int(ctl.recv(64).split(b" ")[1])
        if status // 100 != 2:
            conn.sendall(b"ERR PUT /mmds answered %d; nothing changed\n" % status)
            return
        conn.sendall(f"OK generation={fields['generation']} document=installed stand_in=yes\n".encode())


class SlowGuest(_Server):
    """Is the VMM's socket itself (--uds PATH): every answer after `delay` s."""

    def __init__(self, path: pathlib.Path, delay: float, generation: int = 1):
        self.delay, self.generation = delay, generation
        super().__init__(path)

    def serve(self, conn):
        port = int(_read_until(conn, b"\n").split()[1])
        time.sleep(self.delay)
        conn.sendall(b"OK 1073741824\n")
        if port == 10053:
            time.sleep(self.delay)
            conn.sendall(b"E2B-CLONE/1 ready\n")
            first, fields, _ = _clone_request(conn)
            time.sleep(self.delay)
            generation = fields.get("generation", self.generation)
            conn.sendall(f"OK generation={generation}\n".encode())
            return
        method, path, _, _ = _http_request(conn)
        time.sleep(self.delay)
        if path in ("/health", "/init"):
            conn.sendall(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        else:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
