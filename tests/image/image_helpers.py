"""Helpers and fixtures for the image tests (tests/image/): the envd test stand-in, served from loopback
and pinned in a test lock, and one real e2b-rt build (session scope).

The real envd release cannot be downloaded on our machines, so the build uses
recipes=<tmp> whose envd.lock points at the stand-in (tests/envd-standin/,
built here, never shipped). The package caches are the repository's
(out/cache), so builds after the first are warm.
"""
import functools
import hashlib
import http.server
import os
import pathlib
import shutil
import socket
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CACHE = pathlib.Path(os.environ.get("E2B_IMAGE_CACHE", ROOT / "out" / "cache"))
FLAVOR = "e2b-rt"
BUILD_TIMEOUT = 40 * 60


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def write_lock(directory: pathlib.Path, url: str, sha256: str, version="0.8.0") -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envd.lock").write_text(
        "# test lock: the envd stand-in from tests/envd-standin, served from loopback\n"
        f"[envd]\nversion = {version}\nurl = {url}\nsha256 = {sha256}\n"
    )
    return directory


def make_image(out: pathlib.Path, recipes: pathlib.Path, *extra, target="image",
               cache=CACHE, timeout=BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    cmd = ["make", "-C", str(ROOT), "--no-print-directory", target, f"flavor={FLAVOR}",
           f"recipes={recipes}", f"out={out}", f"cache={cache}", *extra]
    t0 = time.monotonic()
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    cp.seconds = time.monotonic() - t0
    return cp


class Built:
    def __init__(self, out: pathlib.Path, seconds: float):
        self.out = out
        self.dir = out / FLAVOR
        self.tree = self.dir / "work" / "mkosi-out" / "image"
        self.seconds = seconds

    @property
    def manifest(self):
        import json
        return json.loads((self.dir / "manifest.json").read_text())


# Fixtures. Test modules import them by name: a tests/image/conftest.py would
# shadow tests/conftest.py (both import as `conftest`, no packages here).

@pytest.fixture(scope="session")
def standin(tmp_path_factory):
    """The envd stand-in binary, built reproducibly; (path, version)."""
    d = tmp_path_factory.mktemp("standin")
    out = d / "envd"
    subprocess.run([str(ROOT / "tests/envd-standin/build.sh"), str(out)], check=True, timeout=600)
    version = subprocess.run([str(out), "-version"], capture_output=True, text=True,
                             check=True).stdout
    return out, version


@pytest.fixture(scope="session")
def artifact_server(standin):
    """An HTTP server on 127.0.0.1 serving the stand-in at /envd."""
    root = standin[0].parent
    handler = functools.partial(_Quiet, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="session")
def test_recipes(tmp_path_factory, standin, artifact_server):
    d = tmp_path_factory.mktemp("recipes")
    return write_lock(d, f"{artifact_server}/envd", sha256_file(standin[0]),
                      standin[1].strip())


@pytest.fixture(scope="session")
def built(test_recipes):
    """One real build of e2b-rt (mkosi, packing) with the test lock."""
    out = ROOT / "out" / "test-image"
    shutil.rmtree(out, ignore_errors=True)
    cp = make_image(out, test_recipes)
    if cp.returncode != 0:
        pytest.fail(f"make image failed ({cp.returncode}):\n{cp.stdout[-4000:]}\n{cp.stderr[-8000:]}")
    return Built(out, cp.seconds)
