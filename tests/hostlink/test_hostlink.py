"""e2b-hostlink against a stand-in of Firecracker's hybrid-vsock socket
(tests/hostlink/fake_hybrid_vsock.py: the handshake, then a bridge to local
TCP or unix sockets), with real parts behind it: mmds-serve's control socket,
the real envd (built from its pinned source, in a network namespace of its
own), and vsock-relay for the dynamic
relay. Every command and every error; against both builds."""
import contextlib
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

from harness import assert_no_sanitizer_report, free_port, recv_to_eof, stop_process  # noqa: E402
from hostlink_helpers import fake_vmm, real_envd, forwarding, http_get, unanswering_socket, wait_for  # noqa: E402
from relay_helpers import LoopbackServer, activated, cpu_at_emfile, exchange, vsock_ports, wait_port  # noqa: E402

PORTS = vsock_ports()
ENVD, CI, RELAY, CONTROL = (PORTS["VSOCK_PORT_ENVD"], PORTS["VSOCK_PORT_CODE_INTERPRETER"],
                            PORTS["VSOCK_PORT_RELAY"], PORTS["VSOCK_PORT_MMDS_CONTROL"])


@pytest.fixture
def mmds_control(tools, tmp_path):
    """mmds-serve (same build variant) with its control API on a unix socket."""
    ctl = tmp_path / "ctl" / "control.sock"
    log = open(tmp_path / "mmds-serve.log", "w+")
    (tmp_path / "doc").mkdir(exist_ok=True)  # before it starts: it watches the directory at once
    proc = subprocess.Popen([tools.path("mmds-serve"), "--document", str(tmp_path / "doc" / "document.json"),
                             "--listen", f"127.0.0.1:{free_port()}", "--control", str(ctl)],
                            stdout=subprocess.DEVNULL, stderr=log)

    def listening():  # the path exists at bind(), a moment before listen()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            return probe.connect_ex(str(ctl)) == 0
    assert wait_for(lambda: proc.poll() is not None or listening()), "mmds-serve control socket missing"
    assert proc.poll() is None, f"mmds-serve exited {proc.returncode}: {(tmp_path / 'mmds-serve.log').read_text()}"
    yield ctl
    stop_process(proc)
    log.seek(0)
    text = log.read()
    assert "Sanitizer" not in text and "runtime error" not in text, text


@pytest.fixture
def envd(tmp_path):
    """The real envd, its port reached through a unix socket: map it as unix:PATH."""
    with real_envd(tmp_path) as sock:
        yield f"unix:{sock}"


@pytest.fixture
def relay(release_tools, tmp_path):
    with activated([release_tools.path("vsock-relay")], tmp_path / "relay.log") as (port, _):
        yield port


def hostlink(tools, uds, *args, **kw):
    return tools.run("e2b-hostlink", "--uds", uds, *args, **kw)


# ------------------------------------------------------------------ mmds ---

def test_mmds_put_get_patch(tools, tmp_path, mmds_control):
    doc = {"instanceID": "isb-hostlink", "envID": "tmpl", "accessTokenHash": "ab" * 64}
    (tmp_path / "doc.json").write_text(json.dumps(doc))
    with fake_vmm(tmp_path / "v.sock", {CONTROL: f"unix:{mmds_control}"}) as uds:
        cp = hostlink(tools, uds, "mmds", "put", tmp_path / "doc.json")
        assert cp.returncode == 0, cp.stderr
        cp = hostlink(tools, uds, "mmds", "get")
        assert cp.returncode == 0 and json.loads(cp.stdout) == doc, (cp.stdout, cp.stderr)
        cp = hostlink(tools, uds, "mmds", "patch", input='{"envID": "tmpl-2", "address": "x"}')
        assert cp.returncode == 0, cp.stderr
        got = json.loads(hostlink(tools, uds, "mmds", "get").stdout)
        assert got == {**doc, "envID": "tmpl-2", "address": "x"}
        cp = hostlink(tools, uds, "mmds", "put", "-", input='{"instanceID": "from-stdin"}')
        assert cp.returncode == 0 and json.loads(hostlink(tools, uds, "mmds", "get").stdout) == {
            "instanceID": "from-stdin"}


def test_mmds_rejected_document_names_socket_port_and_status(tools, tmp_path, mmds_control):
    with fake_vmm(tmp_path / "v.sock", {CONTROL: f"unix:{mmds_control}"}) as uds:
        cp = hostlink(tools, uds, "mmds", "put", input="{not json")
    assert cp.returncode == 1
    assert f"{uds} port {CONTROL} (mmds control): PUT /mmds: HTTP 400" in cp.stderr, cp.stderr
    assert "fault_message" in cp.stderr


def test_mmds_missing_file(tools, tmp_path):
    cp = tools.run("e2b-hostlink", "--uds", tmp_path / "v.sock", "mmds", "put", tmp_path / "nope.json")
    assert cp.returncode == 1 and f"{tmp_path / 'nope.json'}: No such file or directory" in cp.stderr


# ------------------------------------------------------------------ wait ---

def test_wait_returns_on_204(tools, tmp_path, envd):
    with fake_vmm(tmp_path / "v.sock", {ENVD: envd}) as uds:
        cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "10", "wait")
    assert cp.returncode == 0, cp.stderr
    assert f"{uds} port {ENVD}: /health 204" in cp.stderr


def test_wait_times_out_naming_socket_port_and_last_error(tools, tmp_path):
    with fake_vmm(tmp_path / "v.sock", {}) as uds:
        t0 = time.monotonic()
        cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "1", "wait")
        took = time.monotonic() - t0
    assert cp.returncode == 1
    assert f"{uds} port {ENVD}: not ready: timeout after 1000 ms" in cp.stderr, cp.stderr
    assert "handshake refused" in cp.stderr
    assert took < 10  # bounded (generous: a loaded machine and ASan)


def test_wait_other_port_wants_200(tools, tmp_path):
    """wait 49999: the code interpreter's /health answers 200."""
    srv = LoopbackServer("http")
    try:
        with fake_vmm(tmp_path / "v.sock", {CI: f"127.0.0.1:{srv.port}"}) as uds:
            cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "10", "wait", str(CI))
    finally:
        srv.close()
    assert cp.returncode == 0 and f"port {CI}: /health 200" in cp.stderr, cp.stderr


def test_wait_not_204(tools, tmp_path):
    srv = LoopbackServer("http")  # answers 200, not 204
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"127.0.0.1:{srv.port}"}) as uds:
            cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "1", "wait")
    finally:
        srv.close()
    assert cp.returncode == 1 and "GET /health answered 200, not 204" in cp.stderr, cp.stderr


def test_wait_reports_the_last_real_answer_not_a_cut_short_attempt(tools, tmp_path):
    """The first GET gets 200; every later one hangs, and the 1 s budget
    cuts those attempts short. The report names the 200, not the time-out the
    budget caused (it used to, and test_wait_not_204 flaked on it)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []

    def serve():
        first = True
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            if first:
                c.recv(4096)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                c.close()
                first = False
            else:
                held.append(c)  # never answered
    threading.Thread(target=serve, daemon=True).start()
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"127.0.0.1:{srv.getsockname()[1]}"}) as uds:
            cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "1", "wait")
    finally:
        srv.close()
        for c in held:
            c.close()
    assert cp.returncode == 1 and held, cp.stderr
    assert "last: GET /health answered 200, not 204" in cp.stderr, cp.stderr


# ---------------------------------------------------------------- errors ---

def test_no_such_socket(tools, tmp_path):
    cp = tools.run("e2b-hostlink", "--uds", tmp_path / "missing.sock", "mmds", "get")
    assert cp.returncode == 1
    assert f"{tmp_path / 'missing.sock'} port {CONTROL} (mmds control): no such socket" in cp.stderr, cp.stderr


def test_handshake_refused(tools, tmp_path):
    with fake_vmm(tmp_path / "v.sock", {}) as uds:
        cp = hostlink(tools, uds, "mmds", "get")
    assert cp.returncode == 1
    assert f"{uds} port {CONTROL} (mmds control): vsock port {CONTROL}: handshake refused" in cp.stderr, cp.stderr


def test_handshake_timeout(tools, tmp_path):
    s = unanswering_socket(tmp_path / "v.sock")
    try:
        cp = tools.run("e2b-hostlink", "--uds", tmp_path / "v.sock", "--timeout", "1", "mmds", "get")
    finally:
        s.close()
    assert cp.returncode == 1
    assert f"port {CONTROL} (mmds control): vsock port {CONTROL}: no handshake answer within 1000 ms" in cp.stderr


def test_mmds_put_to_a_guest_that_stops_reading_times_out(tools, tmp_path):
    """--timeout bounds sends too: a 2 MiB document to a guest that accepts
    and never reads fails after about 2 s (it blocked for good before)."""
    sink = unanswering_socket(tmp_path / "sink.sock")
    doc = '{"k": "' + "x" * (2 << 20) + '"}'
    try:
        with fake_vmm(tmp_path / "v.sock", {CONTROL: f"unix:{tmp_path / 'sink.sock'}"}) as uds:
            t0 = time.monotonic()
            cp = hostlink(tools, uds, "--timeout", "2", "mmds", "put", input=doc, timeout=15)
            took = time.monotonic() - t0
    finally:
        sink.close()
    assert cp.returncode == 1, cp.stderr
    assert f"{uds} port {CONTROL} (mmds control): PUT /mmds: sending PUT /mmds: not taken before --timeout ran out " \
        "(the guest stopped reading)" in cp.stderr, cp.stderr
    assert 1.5 < took < 8, took


def full_backlog(path):
    """A unix listener with backlog 0 and one connection queued: the next
    non-blocking connect gets EAGAIN, as with a VMM whose backlog is full."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(0)
    filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    filler.connect(str(path))
    return srv, filler


def test_full_vmm_backlog_is_retried_within_the_timeout(tools, tmp_path):
    """EAGAIN from connect (the VMM's listen backlog full) is retried until
    --timeout; once the backlog has room the command goes through. It failed
    at once with "Transport endpoint is not connected" before."""
    srv, filler = full_backlog(tmp_path / "v.sock")
    proc = subprocess.Popen([tools.path("e2b-hostlink"), "--uds", str(tmp_path / "v.sock"), "--timeout", "10",
                             "mmds", "get"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()
        srv.accept()[0].close()  # the filler's turn: now there is room
        srv.settimeout(5)
        conn, _ = srv.accept()   # e2b-hostlink's retry
        with conn:
            conn.settimeout(5)
            got = b""
            while not got.endswith(b"\n"):
                got += conn.recv(1)
            assert got == f"CONNECT {CONTROL}\n".encode()
            conn.sendall(b"OK 1073741825\n")
            while b"\r\n\r\n" not in got:
                got += conn.recv(4096)
            conn.sendall(b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\n{"a":1}')
        out, err = proc.communicate(timeout=10)
    finally:
        stop_process(proc)
        srv.close()
        filler.close()
    assert_no_sanitizer_report(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert proc.returncode == 0 and json.loads(out) == {"a": 1}, err


def test_full_vmm_backlog_that_stays_full_times_out(tools, tmp_path):
    srv, filler = full_backlog(tmp_path / "v.sock")
    try:
        t0 = time.monotonic()
        cp = tools.run("e2b-hostlink", "--uds", tmp_path / "v.sock", "--timeout", "1", "mmds", "get")
        took = time.monotonic() - t0
    finally:
        srv.close()
        filler.close()
    assert cp.returncode == 1 and took >= 0.9, (took, cp.stderr)
    assert (f"port {CONTROL} (mmds control): vsock port {CONTROL}: connect timed out after 1000 ms "
            "(the VMM's socket kept its listen backlog full)") in cp.stderr, cp.stderr


def test_cid_transport_names_cid_and_port(tools):
    """This host has no vsock transport to a guest: the failure must still say
    which CID and port it tried."""
    cp = tools.run("e2b-hostlink", "--cid", "3", "--timeout", "1", "mmds", "get")
    assert cp.returncode == 1 and f"cid 3 port {CONTROL} (mmds control): vsock port {CONTROL}" in cp.stderr, cp.stderr


@pytest.mark.parametrize("args,msg", [
    ([], "give exactly one of --uds PATH or --cid CID"),
    (["--uds", "/x", "--cid", "3", "wait"], "give exactly one"),
    (["--uds", "/x"], "no command"),
    (["--cid", "0", "wait"], "--cid: '0' is not a number"),
    (["--uds", "/x", "mmds", "delete"], "expected put [FILE|-], patch [FILE|-] or get"),
    (["--uds", "/x", "forward"], "give 1-16 guest ports"),
    (["--uds", "/x", "forward", "70000"], "guest port: '70000' is not a number in 1-65535"),
    (["--uds", "/x", "forward", "--listen", "localhost:1", "80"], "'localhost' is not an IPv4 or [IPv6] address"),
    (["--uds", "/x", "frobnicate"], "unknown command 'frobnicate'"),
])
def test_usage_errors(tools, args, msg):
    cp = tools.run("e2b-hostlink", *args)
    assert cp.returncode == 2 and msg in cp.stderr, cp.stderr


# ------------------------------------------------- guest bytes, escaped ---

EVIL = b"\x1b]0;pwned\x07\x1b[2J\r\nforged: line\xc2\x9b"


@pytest.fixture
def scripted_vmm(tmp_path):
    """Factory: a VMM socket that answers every CONNECT with REPLY and, after
    an OK, every request with RESPONSE; a guest that says what it likes."""
    servers = []

    def start(reply, response=b""):
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path = tmp_path / f"v{len(servers)}.sock"
        srv.bind(str(path))
        srv.listen(8)
        servers.append(srv)

        def serve():
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                with c, contextlib.suppress(OSError):  # the client may hang up at any point
                    c.settimeout(5)
                    got = b""
                    while not got.endswith(b"\n"):
                        got += c.recv(1)
                    c.sendall(reply)
                    while response and b"\r\n\r\n" not in got:
                        got += c.recv(65536)
                    c.sendall(response)
                    c.shutdown(socket.SHUT_WR)
                    while c.recv(65536):
                        pass
        threading.Thread(target=serve, daemon=True).start()
        return path

    yield start
    for srv in servers:
        srv.close()


def http_answer(status, body):
    return b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (status, len(body), body)


def test_mmds_get_raw_to_a_pipe(tools, scripted_vmm):
    """A document piped on is data: byte for byte, control characters too."""
    doc = b'{"t": "' + EVIL + b'"}'
    uds = scripted_vmm(b"OK 1\n", http_answer(200, doc))
    cp = tools.run("e2b-hostlink", "--uds", uds, "mmds", "get", text=False)
    assert cp.returncode == 0 and cp.stdout == doc + b"\n", cp


def test_mmds_get_escaped_on_a_terminal(tools, scripted_vmm):
    """On a terminal the guest's escape sequences are shown, not obeyed."""
    import pty
    uds = scripted_vmm(b"OK 1\n", http_answer(200, b'{"t": "' + EVIL + b'"}\n{"next": 2}'))
    master, slave = pty.openpty()
    proc = subprocess.Popen([tools.path("e2b-hostlink"), "--uds", str(uds), "mmds", "get"], stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        err = proc.communicate(timeout=10)[1]
    finally:
        stop_process(proc)
        os.close(master)
    assert_no_sanitizer_report(subprocess.CompletedProcess(proc.args, proc.returncode, b"", err))
    assert proc.returncode == 0, err
    assert b"\x1b" not in out and b"\x07" not in out and b"\xc2\x9b" not in out, out
    assert b"\\x1b]0;pwned\\x07\\x1b[2J\\x0d" in out and b"\\xc2\\x9b" in out, out
    assert b'\n{"next": 2}' in out.replace(b"\r\n", b"\n"), out  # the document's own lines stay lines


@pytest.mark.parametrize("reply,response,expect", [
    (b"OK 1\n", http_answer(400, b'{"fault_message": "' + EVIL + b'"}'),
     b"HTTP 400: {\"fault_message\": \"\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0aforged: line\\xc2\\x9b\"}"),
    (b"OK \x1b[31m\n", b"", b"bad handshake answer"),
    (b"OK 1\n", b"\x1b[31mHELLO\x07\r\n\r\n", b"not an HTTP/1.x answer: '\\x1b[31mHELLO\\x07"),
], ids=["error-body", "handshake-reply", "http-head"])
def test_guest_words_in_errors_are_escaped(tools, scripted_vmm, reply, response, expect):
    """Error bodies and echoed bad replies reach stderr as one line with
    every control character escaped."""
    uds = scripted_vmm(reply, response)
    cp = tools.run("e2b-hostlink", "--uds", uds, "--timeout", "2", "mmds", "get", text=False)
    assert cp.returncode == 1, cp
    assert expect in cp.stderr, cp.stderr
    assert not any(c < 0x20 and c != 0x0a for c in cp.stderr) and b"\x7f" not in cp.stderr, cp.stderr
    assert cp.stderr.count(b"\n") == 1, cp.stderr


# --------------------------------------------------------------- forward ---

def test_forward_fixed_relay_to_envd(tools, tmp_path, envd):
    with fake_vmm(tmp_path / "v.sock", {ENVD: envd}) as uds, \
            forwarding(tools.path("e2b-hostlink"), uds, ENVD, tmp_path / "fwd.log") as (port, proc):
        for _ in range(3):  # one connection each
            assert http_get(port, "/health")[0] == 204
    assert_no_sanitizer_report(subprocess.CompletedProcess([], 0, "", (tmp_path / "fwd.log").read_text()))


def test_forward_sigterm_with_open_connections_frees_them(tools, tmp_path):
    """SIGTERM while bridges are open: they are closed and freed (no leak
    under ASan), and the exit is clean. Failed before bridges had a set."""
    echo = LoopbackServer("echo-after-eof")  # holds each connection until EOF
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"127.0.0.1:{echo.port}"}) as uds, \
                forwarding(tools.path("e2b-hostlink"), uds, ENVD, tmp_path / "fwd.log") as (port, proc):
            clients = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3)]
            for c in clients:
                c.sendall(b"open")
            assert wait_for(lambda: echo.connections >= 3), echo.connections
            stop_process(proc)
            assert proc.returncode == 0, (proc.returncode, (tmp_path / "fwd.log").read_text())
            for c in clients:
                assert c.recv(16) == b""  # closed by the forwarder
                c.close()
    finally:
        echo.close()
    assert_no_sanitizer_report(subprocess.CompletedProcess([], 0, "", (tmp_path / "fwd.log").read_text()))


def test_forward_dynamic_relay_and_half_close(tools, tmp_path, relay):
    """A user's port goes to vsock port 10000 with "CONNECT <port>"; the
    relay bridges to loopback. EOF travels host -> guest server and the answer
    written after it comes back (half-close through both bridges)."""
    web, echo = LoopbackServer("http"), LoopbackServer("echo-after-eof")
    try:
        with fake_vmm(tmp_path / "v.sock", {RELAY: f"127.0.0.1:{relay}"}) as uds:
            with forwarding(tools.path("e2b-hostlink"), uds, web.port, tmp_path / "fwd1.log") as (port, _):
                assert http_get(port, "/") == (200, b"user-server-ok\n")
            with forwarding(tools.path("e2b-hostlink"), uds, echo.port, tmp_path / "fwd2.log") as (port, _):
                payload = b"x" * (3 << 20)
                assert exchange(port, payload, timeout=30) == b"echo:" + payload
    finally:
        web.close()
        echo.close()


def test_forward_guarded_port_refused_by_the_relay(tools, tmp_path, relay):
    with fake_vmm(tmp_path / "v.sock", {RELAY: f"127.0.0.1:{relay}"}) as uds, \
            forwarding(tools.path("e2b-hostlink"), uds, 8888, tmp_path / "fwd.log") as (port, proc):
        assert exchange(port, b"GET / HTTP/1.1\r\n\r\n") == b""  # closed, nothing relayed
        log = tmp_path / "fwd.log"
        assert wait_for(lambda: "refused" in log.read_text())
    text = log.read_text()
    assert (f"{uds} port 8888: guest port 8888 refused by the relay (vsock port {RELAY}): "
            "not relayed (the guest's journal says why)") in text, text


def test_forward_keeps_bridging_while_another_handshake_hangs(tools, tmp_path):
    """The guest side is opened in the event loop: while one client's
    handshake goes unanswered (a VMM that accepts and says nothing), a bridge
    already open keeps moving bytes at once, and the hung one ends at
    --timeout. forward used to connect inside its loop and froze every
    bridge until the handshake timed out."""
    vmm = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    vmm.bind(str(tmp_path / "v.sock"))
    vmm.listen(8)
    silent, answer = [], threading.Event()

    def serve():  # an echo guest while `answer` is set; otherwise it hangs
        while True:
            try:
                c, _ = vmm.accept()
            except OSError:
                return
            if not answer.is_set():
                silent.append(c)
                continue
            answer.clear()
            line = b""
            while not line.endswith(b"\n"):
                line += c.recv(1)
            c.sendall(b"OK 1073741825\n")
            threading.Thread(target=lambda c=c: [c.sendall(d) for d in iter(lambda: c.recv(4096), b"")],
                             daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    log = tmp_path / "fwd.log"
    try:
        with open(log, "w+") as out:
            port = free_port()
            proc = subprocess.Popen([tools.path("e2b-hostlink"), "--uds", str(tmp_path / "v.sock"), "--timeout", "3",
                                     "forward", "--listen", f"127.0.0.1:{port}", str(ENVD)], stdout=out, stderr=out)
            try:
                wait_port(port, proc)  # its probe's handshake hangs
                assert wait_for(lambda: silent, timeout=5), "the probe's handshake never began"
                answer.set()
                a = socket.create_connection(("127.0.0.1", port), timeout=5)
                a.sendall(b"ping1")
                assert a.recv(16) == b"ping1"
                silent_before = len(silent)
                b = socket.create_connection(("127.0.0.1", port), timeout=5)
                assert wait_for(lambda: len(silent) > silent_before, timeout=5), "the second handshake never began"
                t0 = time.monotonic()
                a.sendall(b"ping2")
                assert a.recv(16) == b"ping2"
                took = time.monotonic() - t0
                assert took < 0.5, f"the open bridge stalled {took:.2f} s behind the hung handshake"
                b.settimeout(10)
                assert recv_to_eof(b, reset_is_eof=True) == b""  # closed at --timeout
                a.close()
                b.close()
            finally:
                stop_process(proc)
    finally:
        vmm.close()
        for c in silent:
            c.close()
    text = log.read_text()
    assert f"port {ENVD}: vsock port {ENVD}: no handshake answer within 3000 ms" in text, text
    assert_no_sanitizer_report(subprocess.CompletedProcess([], 0, "", text))


def test_forward_accept_at_the_fd_limit_backs_off(tools, tmp_path):
    """accept failing with EMFILE (the fd limit lowered under a running
    forward) must not spin on the still-readable listener: forward rests it,
    burns next to no CPU, and serves the waiting client once fds are free.
    It spun at 100% CPU before, like the relay did."""
    echo = LoopbackServer("echo-after-eof")
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"127.0.0.1:{echo.port}"}) as uds, \
                forwarding(tools.path("e2b-hostlink"), uds, ENVD, tmp_path / "fwd.log") as (port, proc):
            spent, client = cpu_at_emfile(proc.pid, port)
            with client:
                client.sendall(b"ping")
                client.shutdown(socket.SHUT_WR)
                assert recv_to_eof(client) == b"echo:ping", "not served once fds were free"
    finally:
        echo.close()
    text = (tmp_path / "fwd.log").read_text()
    warnings = text.count("Too many open files")
    assert spent < 0.3, f"{spent:.2f} s of CPU in 1 s at EMFILE ({warnings} log lines)"
    assert 1 <= warnings <= 30, f"{warnings} accept warnings"



def test_forward_listen_busy(tools, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        busy = s.getsockname()[1]
        cp = tools.run("e2b-hostlink", "--uds", tmp_path / "v.sock", "forward", "--listen",
                       f"127.0.0.1:{busy}", "49983")
    assert cp.returncode == 1 and f"listen on 127.0.0.1:{busy} (for guest port 49983): Address already in use" in cp.stderr
