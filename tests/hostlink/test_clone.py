"""The clone step's host side (e2b-hostlink clone / wait --generation /
prepare-snapshot) against the hybrid-vsock stand-in, with the real guest tool
behind it: one resident e2b-clone on a listening socket passed to it by
systemd's own systemd-socket-activate, as units/e2b-clone.socket (Accept=no)
passes it in the guest, talking to a real mmds-serve's control socket.

What runs here are the refusals (nothing may change), the status and
warmup calls, prepare-snapshot, every error e2b-hostlink names, and the
resident service itself: one process for every connection, no descriptor
left behind by bad, silent, slow or vanished peers, and a good request
served after all of them. A clone step that succeeds steps CLOCK_REALTIME,
which this machine's own clock must not suffer, so e2b-clone runs here
without CAP_SYS_ADMIN and CAP_SYS_TIME (checked): that path runs in the QEMU
snapshot test (tests/boot), in a guest."""
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
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "relay"))

from harness import free_port, recv_to_eof, stop_process  # noqa: E402
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
        # systemd's socket activation without systemd as PID 1: it listens,
        # and at the first connection execs e2b-clone with the listening
        # socket as fd 3 (LISTEN_FDS), in this same process. Without
        # CAP_SYS_ADMIN and CAP_SYS_TIME: the step can never reseed this
        # machine's CRNG, step its clock or set its hostname, whatever a test
        # sends (the first change fails, EPERM).
        self.clone_log = tmp / "e2b-clone.log"
        self.clone_err = open(self.clone_log, "w")
        self.clone = subprocess.Popen(
            ["setpriv", "--inh-caps=-all", "--bounding-set=-sys_admin,-sys_time",
             "systemd-socket-activate", "--listen", str(self.sock), tools.path("e2b-clone"),
             "--control", str(self.ctl), "--generation-file", str(self.gen), "--machine-id", str(self.mid),
             "--random-seed", str(self.seed)],
            stdout=subprocess.DEVNULL, stderr=self.clone_err)
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=1):
                if self.ctl.exists() and self.sock.exists():
                    break
            threading.Event().wait(0.05)
        os.chmod(self.sock, 0o777)

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

    def fds(self):
        """e2b-clone's open descriptors (after its first connection)."""
        return sorted(os.listdir(f"/proc/{self.clone.pid}/fd"))

    def close(self):
        """SIGTERM: e2b-clone ends between connections and exits 0 (and the
        sanitizer build checks for leaks as it does)."""
        stop_process(self.clone)
        self.clone_err.close()
        shutil.rmtree(self.sockdir, ignore_errors=True)
        self.mmds.terminate()
        self.mmds.wait(10)
        self.log.close()
        return self.clone.returncode, self.clone_log.read_text()


@pytest.fixture
def guest(tools, tmp_path):
    tmp_path.chmod(0o755)
    g = Guest(tools, tmp_path)
    g.probe_token = g.token()
    try:
        status(g)  # e2b-clone runs from its first connection on
        caps = {k: int(v, 16) for k, v in (line.split(":\t") for line in
                                            pathlib.Path(f"/proc/{g.clone.pid}/status").read_text().splitlines()
                                            if line.startswith(("CapEff", "CapPrm", "CapBnd")))}
        assert all(not v & (1 << 21 | 1 << 25) for v in caps.values()), caps  # CAP_SYS_ADMIN, CAP_SYS_TIME
    except BaseException:
        g.close()
        raise
    yield g
    rc, log = g.close()
    assert "Sanitizer" not in log and "runtime error" not in log, log
    assert rc == 0 and log.rstrip().endswith("e2b-clone: stopped"), (rc, log)


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


# ------------------------------------------------- the resident service ---

def direct(guest, request: bytes = b"", *, send=True, read=True, timeout=20) -> str:
    """One connection straight to e2b-clone's socket (root over unix, as a
    guest-side caller): the greeting, REQUEST, the answer. SEND=False sends
    nothing and only reads (a silent peer); READ=False closes right after
    sending, without reading a byte (a peer gone)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(guest.sock))
        if send:
            s.sendall(request)
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_WR)
        if not read:
            return ""
        return recv_to_eof(s).decode()


def status(guest) -> str:
    return direct(guest, b"E2B-CLONE/1 status\n\n")


def test_one_resident_process_serves_every_connection(guest):
    """Many connections, good and bad and gone, to one process: it keeps its
    pid, leaves no descriptor behind, and answers the next good request."""
    guest.gen.write_text("4\n")
    assert status(guest) == "E2B-CLONE/1 ready\nOK generation=4\n"
    pid, fds = guest.clone.pid, guest.fds()
    for _ in range(40):
        assert status(guest).endswith("OK generation=4\n")
    bad = [b"GET / HTTP/1.1\r\n\r\n", b"E2B-CLONE/1 clone\ngeneration 5\n\n", clone_request(generation=3),
           clone_request(document=b"[1]"), clone_request(entropy=HEX32[:62]), b"\x00" * 4096,
           b"E2B-CLONE/1 status\n\nmore", b"E2B-CLONE/1 sta"]
    for request in bad * 3:
        answer = direct(guest, request)
        assert answer.startswith("E2B-CLONE/1 ready\nERR ") and "nothing changed" in answer, answer
    for request in bad + [b"", clone_request(generation=9)]:
        direct(guest, request, read=False)  # gone before the answer (EPIPE, not SIGPIPE)
    # A failure after the checks (here: no CAP_SYS_ADMIN for the reseed).
    for _ in range(3):
        answer = direct(guest, clone_request(generation=9))
        assert answer.endswith("ERR /dev/urandom: RNDADDENTROPY/RNDRESEEDCRNG: Operation not permitted; "
                               "generation stays 4\n"), answer
    # A connection closed before the service gets to it at all.
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(str(guest.sock))
    assert status(guest) == "E2B-CLONE/1 ready\nOK generation=4\n"
    assert guest.clone.poll() is None and guest.clone.pid == pid
    assert guest.fds() == fds, (fds, guest.fds())
    assert guest.gen.read_text() == "4\n" and guest.token_status(guest.probe_token)[0] == 200


def test_silent_peer_is_cut_off_and_the_next_is_served(guest):
    """A peer that never sends holds the service for the request's deadline
    (5 s), no longer; one that connected meanwhile waits in the backlog and
    is served right after, with its greeting sent only then."""
    status(guest)
    fds = guest.fds()
    result = {}
    silent = threading.Thread(target=lambda: result.update(silent=direct(guest, send=False)))
    silent.start()
    time.sleep(0.5)  # the silent peer is being served
    assert status(guest) == "E2B-CLONE/1 ready\nOK generation=0\n"
    silent.join(20)
    assert result["silent"] == "E2B-CLONE/1 ready\nERR request incomplete after 5000 ms (0 bytes); nothing changed\n"
    assert guest.fds() == fds


def test_slow_peer_gets_no_more_time(guest):
    """A peer that keeps sending, a byte at a time, gets no more than the
    request's 5 s: the deadline runs from the accept, not from the last byte."""
    request = clone_request(generation=1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        s.connect(str(guest.sock))
        got = b""
        for byte in request:
            s.sendall(bytes([byte]))
            s.settimeout(0.5)
            try:
                got += s.recv(4096)
            except socket.timeout:
                continue
            if b"ERR" in got:
                break
        s.settimeout(20)
        got += recv_to_eof(s)
    answer = got.decode()
    assert answer.startswith("E2B-CLONE/1 ready\nERR request incomplete after 5000 ms ("), answer
    assert int(answer.split("(")[1].split(" ")[0]) < len(request), answer
    assert not guest.gen.exists()
    assert status(guest).endswith("OK generation=0\n")


def test_refused_peer(guest, tools):
    """e2b-clone admits root alone over unix (and the host's CID alone over
    vsock): a VMM socket run as nobody is refused, with one line and the
    close, no greeting; nothing changes, the refusal is in the log, and the
    process serves the next request."""
    before = guest.state()
    with fake_vmm(guest.sockdir / "v.sock", {CLONE: f"unix:{guest.sock}"}, user="nobody") as uds:
        for args in (["clone", "--generation", "1"], ["prepare-snapshot"]) * 3:
            cp = hostlink(tools, uds, *args)
            assert cp.returncode == 1 and "ERR unix peer uid 65534 refused" in cp.stderr, cp.stderr
            assert "ready" not in cp.stderr
    assert guest.state() == before
    assert status(guest).endswith("OK generation=0\n") and guest.clone.poll() is None
    assert "unix peer uid 65534 refused (allowed: vsock CID 2, or root over unix)" in guest.clone_log.read_text()


def test_without_a_listening_socket(tools):
    """Started by hand, not by its socket unit: a clear error, exit 2."""
    cp = tools.run("e2b-clone")
    assert cp.returncode == 2
    assert "no listening socket from systemd (LISTEN_FDS): none passed" in cp.stderr, cp.stderr
    assert "units/e2b-clone.socket" in cp.stderr
