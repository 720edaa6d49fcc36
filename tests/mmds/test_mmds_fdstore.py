"""mmds-serve keeps its document in systemd's file-descriptor store and gets
it back at the next start, and takes the host API on a passed AF_VSOCK
socket. PID 1 here is not systemd, so this test plays systemd's part the
way systemd does it: the listening sockets and the stored fds at 3.. with
LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID, and a NOTIFY_SOCKET that
receives FDSTORE=1 / FDSTOREREMOVE=1 with the fds (SCM_RIGHTS). The server
is killed with SIGKILL between runs, as by a crash or the OOM killer."""
import fcntl
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import time

import pytest

from harness import assert_no_sanitizer_report
from mmds_helpers import read_response

F_GET_SEALS = 1034
F_SEAL_SEAL, F_SEAL_SHRINK, F_SEAL_GROW, F_SEAL_WRITE = 1, 2, 4, 8


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(self.unix_path))


class FakeSystemd:
    """The sockets of mmds.socket, the fd store, and the notify socket."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.guest = socket.socket()
        self.guest.bind(("127.0.0.1", 0))
        self.guest.listen(64)
        self.control_path = tmp_path / "control.sock"
        self.control = socket.socket(socket.AF_UNIX)
        self.control.bind(str(self.control_path))
        self.control.listen(16)
        self.notify_path = tmp_path / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.store = {}  # FDNAME -> fd, as systemd keeps them
        self.messages = []
        self.proc = None
        self.runs = 0

    def start(self, tools, *args, extra=()):
        """Starts mmds-serve with the sockets, the stored fds and extra
        (fd, name) pairs, as systemd passes them."""
        passed = [(self.guest.fileno(), "mmds.socket"), (self.control.fileno(), "mmds.socket"),
                  *extra, *((fd, name) for name, fd in sorted(self.store.items()))]
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 200) for fd, _ in passed]

        def place():  # in the child: fds at 3.., without CLOEXEC
            for i, fd in enumerate(high):
                os.dup2(fd, 3 + i)

        env = dict(os.environ, LISTEN_FDS=str(len(passed)), LISTEN_FDNAMES=":".join(n for _, n in passed),
                   NOTIFY_SOCKET=str(self.notify_path))
        self.runs += 1
        self.log_path = self.dir / f"log{self.runs}"
        self.log = open(self.log_path, "w+")
        # LISTEN_PID is the pid that execs the server: the shell's own.
        self.proc = subprocess.Popen(
            ["sh", "-c", 'export LISTEN_PID=$$; exec "$0" "$@"', tools.path("mmds-serve"), *map(str, args)],
            env=env, close_fds=False, preexec_fn=place, stdout=subprocess.DEVNULL, stderr=self.log)
        for fd in high:
            os.close(fd)
        self.wait_for("READY", "1")

    def receive(self, timeout=10):
        self.notify.settimeout(timeout)
        msg, fds, _, _ = socket.recv_fds(self.notify, 65536, 8)
        fields = dict(line.split("=", 1) for line in msg.decode().splitlines() if "=" in line)
        self.messages.append(fields)
        if fields.get("FDSTORE") == "1":
            assert len(fds) == 1, fields
            self.store[fields["FDNAME"]] = fds[0]
        elif fields.get("FDSTOREREMOVE") == "1":
            os.close(self.store.pop(fields["FDNAME"]))
        else:
            assert not fds, fields
        return fields

    def wait_for(self, key, value, timeout=10):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"mmds-serve exited {self.proc.returncode}: {self.text()}")
            try:
                if self.receive(timeout=0.5).get(key) == value:
                    return
            except socket.timeout:
                pass
        raise AssertionError(f"no {key}={value} from mmds-serve: {self.text()}")

    def settle(self):
        """Takes every pending notification."""
        while True:
            try:
                self.receive(timeout=0.3)
            except socket.timeout:
                return

    def text(self):
        self.log.flush()
        return self.log_path.read_text()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(20)
        self.log.close()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)
            self.log.close()
            cp = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, "", self.log_path.read_text())
            assert_no_sanitizer_report(cp)
            assert self.proc.returncode == 0, cp.stderr

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in self.store.values():
            os.close(fd)
        for s in (self.guest, self.control, self.notify):
            s.close()

    def get(self, path="/"):
        port = self.guest.getsockname()[1]
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 60\r\n\r\n")
        status, _, token, buf = read_response(s)
        assert status == 200
        s.sendall(b"GET %s HTTP/1.1\r\nX-metadata-token: %s\r\nAccept: application/json\r\n\r\n"
                  % (path.encode(), token))
        status, _, body, _ = read_response(s, buf=buf)
        s.close()
        return status, body

    def control_request(self, method, body=None):
        c = UnixHTTPConnection(self.control_path)
        c.request(method, "/mmds", body=body)
        r = c.getresponse()
        out = r.status, r.read()
        c.close()
        return out


def write_document(path, doc):
    fd, tmp = tempfile.mkstemp(prefix=".document.json.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


@pytest.fixture
def systemd(tmp_path):
    fake = FakeSystemd(tmp_path)
    yield fake
    fake.close()


def stored_document(systemd):
    """The one stored entry: sealed, and the document it holds."""
    assert len(systemd.store) == 1, systemd.store
    (name, fd), = systemd.store.items()
    seals = fcntl.fcntl(fd, F_GET_SEALS)
    assert seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == \
        F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, hex(seals)
    data = os.pread(fd, 1 << 20, 0)
    head, stamp, body = data.split(b"\n", 2)
    assert head == b"mmds-fdstore 1"
    return name, json.loads(body)


def test_document_survives_crash_through_fd_store(tools, systemd, tmp_path):
    doc_path = tmp_path / "doc" / "document.json"
    doc_path.parent.mkdir()
    write_document(doc_path, {"from": "file", "n": 1})
    args = ("--document", doc_path, "--fd-store")

    systemd.start(tools, *args)
    systemd.settle()
    assert stored_document(systemd)[1] == {"from": "file", "n": 1}  # a file's document is kept too

    assert systemd.control_request("PUT", json.dumps({"from": "control", "n": 2}))[0] == 204
    systemd.settle()
    name, doc = stored_document(systemd)  # the new one stored, the old one removed
    assert doc == {"from": "control", "n": 2} and name.startswith("mmds-document-")
    assert systemd.get("/from") == (200, b'"control"')

    systemd.kill()  # a crash or the OOM killer: nothing runs on the way out
    systemd.start(tools, *args)
    # The file still holds the older document; the kept one is newer and wins.
    assert systemd.get("/") == (200, b'{"from":"control","n":2}')
    assert "unchanged since the kept document was set" in systemd.text()
    assert systemd.control_request("PATCH", json.dumps({"n": 3}))[0] == 204
    systemd.settle()
    assert stored_document(systemd)[1] == {"from": "control", "n": 3}

    systemd.kill()
    write_document(doc_path, {"from": "file", "n": 4})  # written while the service was down
    systemd.start(tools, *args)
    assert systemd.get("/") == (200, b'{"from":"file","n":4}')
    systemd.settle()
    assert stored_document(systemd)[1] == {"from": "file", "n": 4}
    systemd.stop()


def test_newest_of_two_kept_documents_wins(tools, systemd, tmp_path):
    """A crash between storing the new copy and removing the old leaves
    both: the higher generation is served and the other removed."""
    doc_path = tmp_path / "document.json"
    systemd.start(tools, "--document", doc_path, "--fd-store")
    for n in (1, 2):
        assert systemd.control_request("PUT", json.dumps({"n": n}))[0] == 204
    systemd.settle()
    (name2, fd2), = systemd.store.items()
    # What the store would hold had the server died before removing gen 1.
    old = os.memfd_create("old", os.MFD_ALLOW_SEALING)
    os.write(old, b"mmds-fdstore 1\n0 0 0 0\n{\"n\":1}")
    fcntl.fcntl(old, fcntl.F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
    systemd.store["mmds-document-1"] = old
    systemd.kill()
    systemd.start(tools, "--document", doc_path, "--fd-store")
    assert systemd.get("/n") == (200, b"2")
    systemd.settle()
    assert list(systemd.store) == [name2]
    systemd.stop()


def test_bad_kept_documents_are_ignored(tools, systemd, tmp_path):
    """An unsealed memfd, a non-entry and invalid JSON never replace the
    file's document and never stop the service."""
    doc_path = tmp_path / "document.json"
    write_document(doc_path, {"from": "file"})
    unsealed = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
    os.write(unsealed, b'mmds-fdstore 1\n0 0 0 0\n{"from":"unsealed"}')
    garbage = os.memfd_create("garbage", os.MFD_ALLOW_SEALING)
    os.write(garbage, b'{"from":"garbage"}')
    fcntl.fcntl(garbage, fcntl.F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)
    try:
        systemd.start(tools, "--document", doc_path, "--fd-store",
                      extra=((unsealed, "mmds-document-7"), (garbage, "mmds-document-8"),
                             (garbage, "mmds-document-x")))
        assert systemd.get("/from") == (200, b'"file"')
        log = systemd.text()
        assert "mmds-document-7: not sealed; ignored" in log, log
        assert "mmds-document-8: not a stored document; ignored" in log, log
        assert "mmds-document-x: not a document name; ignored" in log, log
        systemd.stop()
    finally:
        os.close(unsealed)
        os.close(garbage)


def test_vsock_control_socket_recognised(tools, systemd, tmp_path):
    """A passed AF_VSOCK listener is taken as the host API, with the peer
    policy named. (No vsock transport here to connect through: the peer
    decision is unit-tested in mmds-vsock-policy-test, and exercised from
    CID 1 in the QEMU boot.)"""
    try:
        v = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
        v.bind((socket.VMADDR_CID_ANY, socket.VMADDR_PORT_ANY))
        v.listen(4)
    except OSError as e:
        pytest.fail(f"AF_VSOCK listener: {e}")
    port = v.getsockname()[1]
    try:
        systemd.start(tools, "--document", tmp_path / "d.json", extra=((v.fileno(), "mmds-vsock.socket"),))
        assert f"host API on vsock port {port}; peers allowed: CID 2" in systemd.text()
        systemd.stop()
        systemd.start(tools, "--document", tmp_path / "d.json", "--control-vsock-allow-cid", "1,2",
                      extra=((v.fileno(), "mmds-vsock.socket"),))
        assert f"host API on vsock port {port}; peers allowed: CID 1,2" in systemd.text()
        systemd.stop()
    finally:
        v.close()
    cp = tools.run("mmds-serve", "--control-vsock-allow-cid", "1,,2")
    assert cp.returncode == 2 and "--control-vsock-allow-cid" in cp.stderr
