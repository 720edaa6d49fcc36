"""The clone step's host side (e2b-hostlink clone / wait --generation /
prepare-snapshot) against the hybrid-vsock stand-in, with the real guest tool
behind it: e2b-clone started per connection with the connection on fd 0, as
systemd's Accept=yes socket does (the spawner below is that part of systemd,
stood in), talking to a real mmds-serve's control socket.

What runs here are the refusals (nothing may change), the status and
warmup calls, prepare-snapshot, and every error e2b-hostlink names. A
clone step that succeeds steps CLOCK_REALTIME, which this machine's own
clock must not suffer: that path runs in the QEMU snapshot test
(tests/boot), in a guest."""
import contextlib
import shutil
import tempfile
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "relay"))

from harness import free_port, recv_to_eof  # noqa: E402
from hostlink_helpers import fake_vmm  # noqa: E402
from relay_helpers import vsock_ports  # noqa: E402
from test_hostlink import hostlink  # noqa: E402

PORTS = vsock_ports()
CLONE = PORTS["VSOCK_PORT_CLONE"]
HEX32 = "00112233445566778899aabbccddeeff" * 2


class Guest:
    """Files the clone step changes, in a temporary directory, and a real
    mmds-serve whose guest port mints tokens and whose control socket the
    step calls."""

    def __init__(self, tools, tmp: pathlib.Path):
        self.tools, self.tmp = tools, tmp
        self.gen, self.mid, self.seed = tmp / "run-e2b" / "clone-generation", tmp / "machine-id", tmp / "random-seed"
        self.gen.parent.mkdir()
        self.mid.write_text("0123456789abcdef0123456789abcdef\n")
        self.seed.write_bytes(b"\x01" * 512)
        (tmp / "doc").mkdir()
        (tmp / "doc" / "document.json").write_text('{"instanceID": "template"}')
        self.ctl = tmp / "ctl" / "control.sock"
        self.port = free_port()
        self.log = open(tmp / "mmds-serve.log", "w+")
        self.mmds = subprocess.Popen([tools.path("mmds-serve"), "--document", str(tmp / "doc" / "document.json"),
                                      "--listen", f"127.0.0.1:{self.port}", "--control", str(self.ctl)],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        # Where a VMM run as nobody can reach it (pytest's own directories are 0700).
        self.sockdir = pathlib.Path(tempfile.mkdtemp(prefix="clone-guest-"))
        self.sockdir.chmod(0o777)
        self.sock = self.sockdir / "clone.sock"
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(self.sock))
        os.chmod(self.sock, 0o777)
        self.listener.listen(8)
        self.logs = []
        threading.Thread(target=self._accept, daemon=True).start()
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                if self.ctl.exists():
                    break
            threading.Event().wait(0.05)

    def _accept(self):
        """systemd's Accept=yes, stood in: one e2b-clone per connection."""
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            cp = subprocess.run([self.tools.path("e2b-clone"), "--control", str(self.ctl),
                                 "--generation-file", str(self.gen), "--machine-id", str(self.mid),
                                 "--random-seed", str(self.seed)],
                                stdin=conn, capture_output=True, text=True, timeout=30)
            self.logs.append(cp.stderr)
            conn.close()

    def http(self, method, path, headers=()):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            head = "".join(f"{k}: {v}\r\n" for k, v in headers)
            s.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{head}\r\n".encode())
            raw = recv_to_eof(s)
        return int(raw.split(b" ")[1]), raw.partition(b"\r\n\r\n")[2].decode()

    def token(self):
        status, body = self.http("PUT", "/latest/api/token", [("X-metadata-token-ttl-seconds", "600")])
        assert status == 200
        return body

    def token_status(self, token):
        return self.http("GET", "/instanceID", [("X-metadata-token", token)])

    def state(self):
        """Everything a refused request must leave as it was."""
        return (self.gen.read_text() if self.gen.exists() else None, self.mid.read_text(),
                self.seed.exists(), self.token_status(self.probe_token))

    def close(self):
        self.listener.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)
        self.mmds.terminate()
        self.mmds.wait(10)
        self.log.close()


@pytest.fixture
def guest(tools, tmp_path):
    tmp_path.chmod(0o755)
    g = Guest(tools, tmp_path)
    g.probe_token = g.token()
    yield g
    g.close()
    for text in g.logs:
        assert "Sanitizer" not in text and "runtime error" not in text, text


def raw_request(uds: pathlib.Path, request: bytes) -> str:
    """One request through the stand-in, as any host program could send it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(uds))
        s.sendall(f"CONNECT {CLONE}\n".encode())

        def line():  # byte by byte: the greeting may follow the VMM's OK at once
            got = b""
            while not got.endswith(b"\n"):
                got += s.recv(1)
            return got
        assert line().startswith(b"OK ")
        assert line() == b"E2B-CLONE/1 ready\n"
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        return recv_to_eof(s).decode()


def clone_request(generation=5, entropy=HEX32, document=None):
    head = f"E2B-CLONE/1 clone\ngeneration {generation}\nrealtime 1764600000.000000000\nentropy {entropy}\n"
    if document is None:
        return (head + "\n").encode()
    return (head + f"document {len(document)}\n\n").encode() + document


@pytest.mark.parametrize("request_bytes,why", [
    (clone_request(entropy=HEX32[:62]), "entropy: 62 hex digits"),
    (clone_request(entropy=HEX32.upper()), "entropy: byte 10 is not two lowercase hex digits"),
    (b"E2B-CLONE/1 clone\ngeneration 5\n\n", "expected the field 'realtime"),
    (b"GET /mmds HTTP/1.1\r\n\r\n", "not a clone-step request"),
    (clone_request(generation=2), "generation 2 is not after the clone's current generation 4"),
    (clone_request(document=b'{"instanceID": '), "document: "),
    (clone_request(document=b'[1]'), "not a JSON object"),
    (clone_request(document=b'{"hostname": "a b"}'), "\"hostname\" is not a host name"),
], ids=["short-entropy", "uppercase-hex", "missing-fields", "not-the-protocol", "generation-backwards",
        "document-not-json", "document-not-object", "bad-hostname"])
def test_refused_request_changes_nothing(guest, tmp_path, request_bytes, why):
    guest.gen.write_text("4\n")
    before = guest.state()
    with fake_vmm(tmp_path / "v.sock", {CLONE: f"unix:{guest.sock}"}) as uds:
        answer = raw_request(uds, request_bytes)
    assert answer.startswith("ERR ") and why in answer and answer.rstrip().endswith("nothing changed"), answer
    assert guest.state() == before
    assert before[3][0] == 200  # the token minted before still works: the key was not rotated


def test_hostlink_clone_backwards_generation_is_refused(guest, tools, tmp_path):
    guest.gen.write_text("7\n")
    before = guest.state()
    (tmp_path / "clone.json").write_text('{"instanceID": "clone-1"}')
    with fake_vmm(tmp_path / "v.sock", {CLONE: f"unix:{guest.sock}"}) as uds:
        cp = hostlink(tools, uds, "clone", "--generation", "7", "--document", tmp_path / "clone.json")
    assert cp.returncode == 1
    assert f"{uds} port {CLONE} (clone step): clone refused: ERR generation 7 is not after" in cp.stderr, cp.stderr
    assert guest.state() == before
    assert guest.token_status(guest.probe_token) == (200, "template")


def test_wait_generation_passes_only_at_that_generation(guest, tools, tmp_path):
    with fake_vmm(tmp_path / "v.sock", {CLONE: f"unix:{guest.sock}"}) as uds:
        cp = hostlink(tools, uds, "--timeout", "1", "wait", "--generation", "3")
        assert cp.returncode == 1
        assert "not at generation 3" in cp.stderr and "(last: at generation 0)" in cp.stderr, cp.stderr
        guest.gen.write_text("3\n")
        cp = hostlink(tools, uds, "--timeout", "5", "wait", "--generation", "3")
        assert cp.returncode == 0, cp.stderr
        cp = hostlink(tools, uds, "--timeout", "1", "wait", "--generation", "2")
        assert cp.returncode == 1 and "(last: at generation 3)" in cp.stderr, cp.stderr


def test_prepare_snapshot_forgets_seed_tokens_and_generation(guest, tools, tmp_path):
    guest.gen.write_text("2\n")
    with fake_vmm(tmp_path / "v.sock", {CLONE: f"unix:{guest.sock}"}) as uds:
        cp = hostlink(tools, uds, "prepare-snapshot")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.strip() == \
        "OK prepared random_seed=removed token_key=rotated generation=cleared synced=yes"
    assert not guest.seed.exists() and not guest.gen.exists()
    # A token minted before the snapshot is refused; a fresh one works.
    assert guest.token_status(guest.probe_token) == (401, "MMDS token not valid.")
    assert guest.token_status(guest.token()) == (200, "template")


def test_older_guest_without_the_clone_step(tools, tmp_path):
    with fake_vmm(tmp_path / "v.sock", {}) as uds:
        for args in (["clone"], ["--timeout", "1", "wait", "--generation", "1"], ["prepare-snapshot"]):
            cp = hostlink(tools, uds, *args)
            assert cp.returncode == 1
            assert f"{uds} port {CLONE} (clone step)" in cp.stderr
            if args[0] != "--timeout":
                assert "a guest image without the clone step (e2b-clone.socket)" in cp.stderr, cp.stderr


def test_missing_socket(tools, tmp_path):
    cp = hostlink(tools, tmp_path / "absent.sock", "clone", "--generation", "1")
    assert cp.returncode == 1
    assert f"{tmp_path / 'absent.sock'} port {CLONE} (clone step): status" not in cp.stderr
    assert "no such socket" in cp.stderr, cp.stderr


def test_refused_peer(guest, tools):
    """e2b-clone admits root alone over unix (and the host's CID alone over
    vsock): a VMM socket run as nobody is refused, and nothing changes."""
    before = guest.state()
    with fake_vmm(guest.sockdir / "v.sock", {CLONE: f"unix:{guest.sock}"}, user="nobody") as uds:
        cp = hostlink(tools, uds, "clone", "--generation", "1")
    assert cp.returncode == 1
    assert "ERR unix peer uid 65534 refused" in cp.stderr, cp.stderr
    assert guest.state() == before


def test_bad_arguments(tools, tmp_path):
    for args, why in ((["clone", "--generation", "0"], "clone --generation '0'"),
                      (["wait", "--generation", "x"], "wait --generation 'x'"),
                      (["clone", "--document", tmp_path / "none.json"], "none.json")):
        cp = hostlink(tools, tmp_path / "v.sock", *args)
        assert cp.returncode in (1, 2) and why in cp.stderr, cp.stderr


def control(guest, method, target, body=b""):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(guest.ctl))
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        return int(recv_to_eof(s).split(b" ")[1])


def test_mmds_token_key_rotation(guest):
    """mmds-serve's PUT /token-key, which the clone step calls: a body or
    another method is refused and changes nothing; the call itself makes
    every earlier token invalid."""
    assert control(guest, "PUT", "/token-key", b"x") == 400
    assert control(guest, "GET", "/token-key") == 400
    assert guest.token_status(guest.probe_token)[0] == 200
    assert control(guest, "PUT", "/token-key") == 204
    assert guest.token_status(guest.probe_token) == (401, "MMDS token not valid.")
