"""vsock-relay, the guest's dynamic relay, on loopback TCP: the same code the
guest runs on vsock port 10000 (socket activation through
systemd-socket-activate, like the .socket unit). Against both builds."""
import socket
import time

import pytest

from harness import recv_to_eof
from relay_helpers import LoopbackServer, activated, bind_below_ephemeral, cpu_at_emfile, ephemeral_range, exchange


@pytest.fixture
def relay(tools, tmp_path):
    """Factory: relay(*args) -> port of a running vsock-relay."""
    started = []

    def start(*args):
        cm = activated([tools.path("vsock-relay"), "-v", *args], tmp_path / f"relay-{len(started)}.log")
        port, proc = cm.__enter__()
        started.append((cm, proc))
        return port

    yield start
    for cm, proc in started:
        assert proc.poll() is None, f"vsock-relay died: exit {proc.returncode}"
        cm.__exit__(None, None, None)
    logs = "".join(p.read_text() for p in tmp_path.glob("relay-*.log"))
    assert "Sanitizer" not in logs and "runtime error" not in logs, logs


ERR_LINE = b"ERR not relayed (the guest's journal says why)\n"


@pytest.fixture
def journal(tmp_path):
    """What the relays started by `relay` logged so far (their stderr)."""
    return lambda: "".join(p.read_text() for p in sorted(tmp_path.glob("relay-*.log")))


@pytest.fixture
def server():
    servers = []

    def start(mode="http"):
        s = LoopbackServer(mode)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.close()


def test_connect_ok_then_bytes_reach_the_loopback_server(relay, server):
    srv, port = server(), relay()
    out = exchange(port, f"CONNECT {srv.port}\n".encode() + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", half_close=False)
    assert out.startswith(b"OK\nHTTP/1.1 200 OK\r\n") and out.endswith(b"user-server-ok\n"), out


def test_half_close_both_ways_and_bytes_after_the_line(relay, server):
    """The host's EOF reaches the server as EOF (shutdown propagation); the
    server's answer after that still comes back; bytes pipelined right after
    the CONNECT line are not lost."""
    srv, port = server("echo-after-eof"), relay()
    payload = bytes(range(256)) * 4096  # 1 MiB: more than any one buffer
    out = exchange(port, f"CONNECT {srv.port}\n".encode() + payload)
    assert out[:3] == b"OK\n"
    assert out[3:] == b"echo:" + payload
    assert srv.received == [payload]


@pytest.mark.parametrize("port,why", [
    (8888, "port 8888 is refused: Jupyter, which has no token"),
    (49983, "port 49983 is refused: envd"),
    (49999, "port 49999 is refused: the code interpreter"),
    (80, "port 80 is refused: the metadata service"),
])
def test_guarded_ports_refused_with_one_line(relay, journal, port, why):
    out = exchange(relay(), f"CONNECT {port}\n".encode())
    assert out == ERR_LINE, out
    assert f"refused: {why}" in journal()


@pytest.mark.parametrize("line,why", [
    (b"GET / HTTP/1.1\r\n", "does not start with \"CONNECT \""),
    (b"CONNECT 0\n", "port 0 is out of range 1-65535"),
    (b"CONNECT 65536\n", "port 65536 is out of range"),
    (b"CONNECT 08080\n", "leading zero"),
    (b"CONNECT 80 \n", "not a digit"),
    (b"CONNECT 8080\r\n", "not a digit"),
    (b"A" * 300, "no newline in the first 256 bytes"),
])
def test_malformed_lines_refused(relay, journal, line, why):
    out = exchange(relay(), line, half_close=False)
    assert out == ERR_LINE, out
    assert "refused: bad request line: " in journal() and why in journal(), journal()


def test_closed_port_is_the_same_line_as_a_guarded_one(relay, journal):
    """A closed port, a guarded port and an ephemeral one all get the one
    ERR line: the host cannot map the guest's loopback through the relay.
    The journal keeps the difference. (The closed port said "Connection
    refused" and the guarded one named the service before.)"""
    port, eph = relay(), ephemeral_range()[0]
    with socket.socket() as s:  # a port nobody listens on, below the ephemeral range
        dead = bind_below_ephemeral(s)
    closed = exchange(port, f"CONNECT {dead}\n".encode())
    guarded = exchange(port, b"CONNECT 8888\n")
    ephemeral = exchange(port, f"CONNECT {eph}\n".encode())
    assert closed == guarded == ephemeral == ERR_LINE, (closed, guarded, ephemeral)
    log = journal()
    assert f"refused: 127.0.0.1:{dead}: Connection refused" in log, log
    assert "refused: port 8888 is refused: Jupyter" in log, log
    assert f"refused: port {eph} is refused: in the kernel's ephemeral port range" in log, log


def test_handshake_timeout(relay, journal):
    port = relay("--handshake-timeout", "300")
    t0 = time.monotonic()
    out = exchange(port, b"CONNECT 80", half_close=False)
    assert out == ERR_LINE
    assert time.monotonic() - t0 < 5
    assert "refused: no complete CONNECT line within 300 ms" in journal()


def test_ephemeral_range_refused_by_default(relay, journal):
    """By default the kernel's ephemeral range (read from /proc at start) is
    refused: a server there (bound to port 0, like a Jupyter kernel's
    sockets) is a process's private port. --ephemeral-ports off allows it,
    LO-HI names another range. (Relayed before.)"""
    lo, hi = ephemeral_range()
    srv = socket.socket()  # a server on a port the kernel picked
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    try:
        eph = srv.getsockname()[1]
        assert lo <= eph <= hi
        assert exchange(relay(), f"CONNECT {eph}\n".encode()) == ERR_LINE
        assert f"refused: port {eph} is refused: in the kernel's ephemeral port range" in journal(), journal()
        with socket.create_connection(("127.0.0.1", relay("--ephemeral-ports", "off")), timeout=5) as c:
            c.sendall(f"CONNECT {eph}\n".encode())
            assert c.recv(3) == b"OK\n"
        with socket.create_connection(("127.0.0.1", relay("--ephemeral-ports", f"{eph}-{eph}")), timeout=5) as c:
            c.sendall(f"CONNECT {eph}\n".encode())
            assert c.recv(64) == ERR_LINE
    finally:
        srv.close()


@pytest.mark.parametrize("value", ["1-0", "x", "0-5", "70000-70001", "5-"])
def test_bad_ephemeral_option(tools, value):
    cp = tools.run("vsock-relay", "--ephemeral-ports", value)
    assert cp.returncode == 2 and "--ephemeral-ports: port range" in cp.stderr, cp.stderr


def test_guarded_list_from_the_option(relay, journal, server):
    srv = server()
    port = relay("--guarded", f"{srv.port}")
    assert exchange(port, f"CONNECT {srv.port}\n".encode()) == ERR_LINE
    assert exchange(port, b"CONNECT 80\n") == ERR_LINE
    assert f"port {srv.port} is refused" in journal() and "port 80 is refused" in journal()


def test_connection_limit_queues_the_rest(relay, server):
    """--max-connections 2: a third connection is not served (not even read)
    until one of the two ends, then it is."""
    srv, port = server(), relay("--max-connections", "2")
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    try:
        for s in held:
            s.sendall(f"CONNECT {srv.port}\n".encode())
            assert s.recv(3) == b"OK\n"
        third = socket.create_connection(("127.0.0.1", port), timeout=1.0)
        third.sendall(f"CONNECT {srv.port}\n".encode())
        with pytest.raises(socket.timeout):
            third.recv(3)
        held[0].close()
        third.settimeout(10)
        assert third.recv(3) == b"OK\n"
        third.close()
    finally:
        for s in held:
            s.close()


def test_bad_options_and_no_socket(tools):
    cp = tools.run("vsock-relay", "--guarded", "8888,x")
    assert cp.returncode == 2 and "--ports" in cp.stderr and "'x' is not a digit" in cp.stderr
    cp = tools.run("vsock-relay")
    assert cp.returncode == 1 and "no listening socket from systemd (LISTEN_FDS)" in cp.stderr


def test_fixed_relay_no_line_no_policy(relay, server):
    """--to-port (the fixed relays of vsock-proxy@.service): bytes go straight
    to that port, half-close included; a closed port is just a close."""
    srv = server("echo-after-eof")
    port = relay("--to-port", str(srv.port))
    assert exchange(port, b"CONNECT 8888\n") == b"echo:CONNECT 8888\n"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    assert exchange(relay("--to-port", str(dead)), b"hello") == b""


def test_fixed_relay_refuses_guarded_option(tools):
    cp = tools.run("vsock-relay", "--to-port", "49983", "--guarded", "8888")
    assert cp.returncode == 2 and "--guarded applies to the CONNECT relay" in cp.stderr
    cp = tools.run("vsock-relay", "--to-port", "49983", "--ephemeral-ports", "off")
    assert cp.returncode == 2 and "--ephemeral-ports applies to the CONNECT relay" in cp.stderr


@pytest.mark.parametrize("kind", ["fixed", "dynamic"])
def test_full_relay_evicts_the_longest_idle_bridge(relay, server, kind):
    """N+1 clients send half a request ("GET / HTTP/1.1\\r\\n", as a stalled
    client would to envd, which keeps such a connection for minutes) and stop;
    the limit is N. Once they have been idle for --idle-evict-after, a fresh
    client's request is answered within a second: the relay closes the
    longest-idle bridge for it. Before the fix the relay stopped accepting at
    the limit and never dropped an idle bridge, so /health went unanswered."""
    srv, limit = server(), 4
    args = ["--max-connections", str(limit), "--idle-evict-after", "1"]
    port = relay("--to-port", str(srv.port), *args) if kind == "fixed" else relay(*args)
    line = b"" if kind == "fixed" else f"CONNECT {srv.port}\n".encode()
    held = []
    try:
        for _ in range(limit + 1):
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(line + b"GET / HTTP/1.1\r\n")
            held.append(s)
        time.sleep(1.5)  # every bridge idle longer than --idle-evict-after
        t0 = time.monotonic()
        out = exchange(port, line + b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", timeout=5, half_close=False)
        took = time.monotonic() - t0
        assert out.startswith((b"" if kind == "fixed" else b"OK\n") + b"HTTP/1.1 200 OK\r\n"), out
        assert took < 1.0, f"answered after {took:.2f} s"
        closed = 0
        for s in held:  # the longest idle were closed to make room
            s.settimeout(0.2)
            try:
                recv_to_eof(s, reset_is_eof=True)
                closed += 1
            except socket.timeout:
                pass
        assert closed >= 1, "no held connection was closed"
    finally:
        for s in held:
            s.close()


@pytest.mark.parametrize("port,why", [(8888, "Jupyter, which has no token"), (80, "the metadata service's port")])
def test_fixed_relay_refuses_a_guarded_port_without_a_fixed_relay(tools, port, why):
    """--to-port has no policy, so it must never open a guarded port that has
    no fixed relay of its own (it relayed 8888 to vsock before)."""
    cp = tools.run("vsock-relay", "--to-port", port)
    assert cp.returncode == 2, cp.stderr
    assert f"--to-port {port}: refused: {why}, and it has no fixed relay (only 49983 and 49999 do)" in cp.stderr


def test_fixed_relays_only(tools):
    cp = tools.run("vsock-relay", "--to-port", "3000", "--fixed-relays-only")
    assert cp.returncode == 2 and "--to-port 3000: not a fixed relay's port" in cp.stderr, cp.stderr
    for port in (49983, 49999):  # accepted: it gets as far as looking for its socket
        cp = tools.run("vsock-relay", "--to-port", port, "--fixed-relays-only")
        assert cp.returncode == 1 and "no listening socket from systemd" in cp.stderr, cp.stderr
    cp = tools.run("vsock-relay", "--fixed-relays-only")
    assert cp.returncode == 2 and "--fixed-relays-only goes with --to-port" in cp.stderr



def test_accept_at_the_fd_limit_backs_off(tools, tmp_path, server):
    """accept failing with EMFILE (the fd limit lowered under a running relay,
    prlimit) must not spin on the still-readable listener: the relay stops
    polling it briefly, burns next to no CPU, logs a few lines, not
    thousands, and serves the waiting client once fds are free again. It
    spun at 100% CPU before."""
    srv = server()
    with activated([tools.path("vsock-relay"), "--to-port", srv.port], tmp_path / "relay-emfile.log") as (port, proc):
        spent, client = cpu_at_emfile(proc.pid, port)
        with client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert recv_to_eof(client).startswith(b"HTTP/1.1 200 OK"), "not served once fds were free"
        assert proc.poll() is None
    log = (tmp_path / "relay-emfile.log").read_text()
    warnings = log.count("Too many open files")
    assert spent < 0.3, f"{spent:.2f} s of CPU in 1 s at EMFILE ({warnings} log lines)"
    assert 1 <= warnings <= 30, f"{warnings} accept warnings"


def test_max_connections_bounded_by_the_fd_limit(tools, tmp_path, server):
    """--max-connections 256 under RLIMIT_NOFILE 40 runs into EMFILE at about
    17 connections: it is lowered to what fits (2 fds each, 16 and the
    listener reserved: 11), with a warning. 20 clients: 11 are served, the
    rest wait in the backlog, and accept never fails. (Before, the 18th
    accept hit EMFILE.)"""
    srv = server("echo-after-eof")
    log = tmp_path / "relay-nofile.log"
    argv = ["prlimit", "--nofile=40:40", "--", tools.path("vsock-relay"), "--to-port", srv.port,
            "--max-connections", "256"]
    with activated(argv, log) as (port, proc):
        time.sleep(0.3)  # activated()'s probe has come and gone
        base = srv.connections
        held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(20)]
        try:
            for i, s in enumerate(held):
                s.sendall(b"%d" % i)
            assert wait_for_count(srv, base + 11), srv.connections - base
            time.sleep(0.3)
            assert srv.connections - base == 11, srv.connections - base
        finally:
            for s in held:
                s.close()
        assert proc.poll() is None
    text = log.read_text()
    assert "--max-connections 256: RLIMIT_NOFILE 40 fits 11 connections (2 fds each); using 11" in text, text
    assert "Too many open files" not in text, text


def wait_for_count(srv, n, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if srv.connections >= n:
            return True
        time.sleep(0.02)
    return False
