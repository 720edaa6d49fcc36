"""Shared by every test layer: where the builds are, how to run a tool, the
sanitizer checks, and the `tools` fixture (registered by tests/conftest.py).
Test modules import from here, never from `conftest`, which more than one
folder may have.

Integration tests that exercise a C tool take the ``tools`` fixture: it runs
each test twice, against the release build (build/) and the ASan+UBSan build
(build/san/), so the sanitizer pass covers every integration test.
"""
import json
import os
import pathlib
import socket
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BUILD = pathlib.Path(os.environ.get("BUILD", ROOT / "build"))

# Sanitizer reports must fail the test even when the tool is expected to exit
# non-zero, so they exit with a code no tool uses.
SANITIZER_EXIT = 86
SAN_ENV = {
    "ASAN_OPTIONS": f"exitcode={SANITIZER_EXIT}:detect_leaks=1:abort_on_error=0:strict_string_checks=1",
    "UBSAN_OPTIONS": f"halt_on_error=1:print_stacktrace=1:exitcode={SANITIZER_EXIT}",
    "LSAN_OPTIONS": f"exitcode={SANITIZER_EXIT}",
}
os.environ.update(SAN_ENV)


class Tools:
    """Where one build variant's tools live, and how to run them."""

    def __init__(self, variant: str, directory: pathlib.Path):
        self.variant = variant
        self.dir = directory

    def path(self, name: str) -> str:
        p = self.dir / name
        if not p.exists():
            pytest.fail(f"{p} is missing: run `make tools san-tools` first")
        return str(p)

    def run(self, name: str, *args, check_sanitizer=True, **kw) -> subprocess.CompletedProcess:
        kw.setdefault("capture_output", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 120)
        cp = subprocess.run([self.path(name), *map(str, args)], **kw)
        if check_sanitizer:
            assert_no_sanitizer_report(cp)
        return cp


    def lock_stanza(self, lock, name: str) -> dict:
        """One stanza of a lock file, read by the one lock parser
        (`pinfetch --lock F --name N --json`); a bad lock fails the test."""
        cp = self.run("pinfetch", "--lock", lock, "--name", name, "--json")
        assert cp.returncode == 0, cp.stderr
        return json.loads(cp.stdout)


def assert_no_sanitizer_report(cp: subprocess.CompletedProcess) -> None:
    err = cp.stderr if isinstance(cp.stderr, str) else (cp.stderr or b"").decode(errors="replace")
    assert cp.returncode != SANITIZER_EXIT and "Sanitizer" not in err and "runtime error:" not in err, (
        f"sanitizer report from {cp.args!r}:\n{err}"
    )


@pytest.fixture(params=["release", "asan"], scope="session")
def tools(request) -> Tools:
    return Tools(request.param, BUILD if request.param == "release" else BUILD / "san")


@pytest.fixture(scope="session")
def release_tools() -> Tools:
    return Tools("release", BUILD)


def declared(variable: str) -> list:
    """The programs the Makefile declares (UNITS, FUZZERS, TOOLS), so a stale
    binary left in build/ by a renamed target is never mistaken for a test."""
    out = subprocess.run(["make", "-s", "--no-print-directory", "-C", str(ROOT), f"print-{variable}"],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (just now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recv_to_eof(s: socket.socket, chunk: int = 65536, reset_is_eof: bool = False) -> bytes:
    """Everything the peer sends until it closes (a reset too, if RESET_IS_EOF)."""
    out = b""
    while True:
        try:
            c = s.recv(chunk)
        except ConnectionResetError:
            if not reset_is_eof:
                raise
            break
        if not c:
            return out
        out += c
    return out


def read_pty(master: int) -> bytes:
    """All a pseudo-terminal's master reads until every holder of its
    slave side is gone (EIO), or, for a master set non-blocking, until
    nothing more is there now."""
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except (BlockingIOError, OSError):  # EIO: every holder of the terminal is gone
            return seen
        if not chunk:
            return seen
        seen += chunk


def stop_process(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM, then SIGKILL if it is still there after TIMEOUT; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def mount_points() -> list:
    """Every mount point of this process's mount namespace (/proc/self/mountinfo)."""
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f]


def require_root():
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, nftables)")
