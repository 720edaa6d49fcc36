"""os-image/e2b-ci/wait-for-jupyter, code-interpreter.service's wait for
Jupyter's GET /api/status, run on the host against real HTTP servers on
loopback ports of this machine (Python's http.server, answering as told)."""
import http.server
import socket
import subprocess
import threading
import time

import pytest

from ci_helpers import FLAVOR_DIR

WAIT = FLAVOR_DIR / "wait-for-jupyter"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """An HTTP server on 127.0.0.1:port whose /api/status answers `status`."""

    def __init__(self, port, status):
        served = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                served.append(self.path)
                self.send_response(status if self.path == "/api/status" else 404)
                self.end_headers()
                self.wfile.write(b'{"started": "now"}')

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def wait(*args, timeout=30):
    t0 = time.monotonic()
    cp = subprocess.run([WAIT, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    return cp, time.monotonic() - t0


def test_returns_once_jupyter_answers_even_if_it_starts_late():
    port = free_port()
    servers = []
    timer = threading.Timer(1.5, lambda: servers.append(Server(port, 200)))
    timer.start()
    try:
        cp, took = wait(port, 20)
    finally:
        timer.join()
        for s in servers:
            s.close()
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    assert 1.4 < took < 5, took
    assert servers[0].requests == ["/api/status"]


def test_a_jupyter_that_answers_an_error_is_waited_for_then_named():
    port = free_port()
    server = Server(port, 500)
    try:
        cp, took = wait(port, 2)
    finally:
        server.close()
    assert cp.returncode == 1
    assert f"Jupyter at 127.0.0.1:{port} did not answer GET /api/status with 200 within 2 s" in cp.stderr
    assert 'last try: GET /api/status answered "HTTP/1.0 500"' in cp.stderr
    assert "journalctl -u jupyter.service" in cp.stderr
    assert 1.9 < took < 4, took
    # Polled every 0.2 s or so, not once and not in a busy loop.
    assert 5 <= len(server.requests) <= 12, len(server.requests)


def test_nothing_listening_times_out_after_the_limit():
    port = free_port()
    cp, took = wait(port, 1)
    assert cp.returncode == 1
    assert "last try: could not connect" in cp.stderr
    assert "Connection refused" not in cp.stderr and "/dev/tcp" not in cp.stderr, "bash's own error leaked"
    assert 0.95 < took < 2.5, took


def test_a_listener_that_never_answers_is_bounded_per_try():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        cp, took = wait(s.getsockname()[1], 1, timeout=20)
    assert cp.returncode == 1
    assert "last try: GET /api/status: no status line within 5 s" in cp.stderr
    assert 4.9 < took < 8, took


def test_a_poll_starts_no_process(tmp_path):
    """The point of the script: under QEMU/TCG each process costs the boot
    guest CPU. Over 2 s of polls (about ten tries) bash forks once, for the
    pipe it naps on, and executes nothing."""
    port = free_port()
    trace = tmp_path / "trace"
    cp = subprocess.run(["strace", "-f", "-qq", "-e", "trace=fork,vfork,clone,clone3,execve", "-e", "signal=none", "-o", trace,
                         WAIT, str(port), "2"], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 1, cp.stderr
    calls = [l for l in trace.read_text().splitlines() if "resumed>" not in l and "exited with" not in l]
    execs = [l for l in calls if "execve(" in l]
    forks = [l for l in calls if "execve(" not in l]
    assert len(execs) == 1 and str(WAIT) in execs[0], execs
    assert len(forks) == 1, forks


@pytest.mark.parametrize("args, message", [
    (["0"], 'PORT "0" is not a TCP port'),
    (["65536"], 'PORT "65536" is not a TCP port'),
    (["http://127.0.0.1:8888"], "is not a TCP port"),
    (["8888", "0"], 'SECONDS "0" is not a whole number of seconds'),
    (["8888", "1.5"], 'SECONDS "1.5" is not a whole number of seconds'),
    (["8888", "10", "x"], "too many arguments"),
])
def test_bad_arguments_are_usage_errors(args, message):
    cp, took = wait(*args)
    assert cp.returncode == 2
    assert message in cp.stderr and "usage: wait-for-jupyter [PORT [SECONDS]]" in cp.stderr
    assert took < 1
