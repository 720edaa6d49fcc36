"""Helpers for the e2b-ci flavor's tests (tests/image_ci), under a module
name no other test folder uses (they share sys.path; only tests/conftest.py
is named conftest). Test modules import the fixtures below by name.

The real e2b-dev/code-interpreter archive cannot be downloaded here, so these
tests pack the stand-in under tests/fixtures/code-interpreter (our own code,
upstream's layout) into a tarball shaped like GitHub's archive of a commit,
serve it from loopback, and fetch it through build/pinfetch.
"""
import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import os
import pathlib
import shutil
import subprocess
import tarfile
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FLAVOR_DIR = ROOT / "os-image" / "e2b-ci"
FIXTURE = ROOT / "tests" / "fixtures" / "code-interpreter"
# A made-up commit id for the stand-in: it names the archive's top directory.
FIXTURE_COMMIT = "0" * 39 + "1"
FIXTURE_TOP = f"code-interpreter-{FIXTURE_COMMIT}"


def pack_fixture(src: pathlib.Path = FIXTURE, top: str = FIXTURE_TOP) -> bytes:
    """A deterministic .tar.gz of SRC under TOP/, like GitHub's archives."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        paths = sorted(p for p in src.rglob("*") if "__pycache__" not in p.parts)
        for p in [src, *paths]:
            rel = p.relative_to(src)
            name = top if str(rel) == "." else f"{top}/{rel}"
            info = tar.gettarinfo(str(p), arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 1700000000
            info.mode = 0o755 if p.is_dir() else 0o644
            if p.is_file():
                with open(p, "rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


class Served:
    def __init__(self, directory: pathlib.Path, port: int):
        self.dir = directory
        self.port = port

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


@contextlib.contextmanager
def serve_directory(directory: pathlib.Path):
    """A loopback HTTP server over DIRECTORY, on a free port, for the block."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(directory, server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([str(c) for c in cmd], **kw)


def prepare(archive, extra, work, flavor_dir=FLAVOR_DIR, env=None):
    e = dict(os.environ)
    e.pop("pydeps", None)
    e.update(env or {})
    return run([flavor_dir / "prepare.sh", "--archive", archive, "--extra", extra, "--work", work], env=e)


@pytest.fixture(scope="session")
def fixture_archive(tmp_path_factory):
    """(path, sha256) of the packed stand-in archive."""
    d = tmp_path_factory.mktemp("ci-archive")
    data = pack_fixture()
    path = d / f"{FIXTURE_COMMIT}.tar.gz"
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


@pytest.fixture()
def served_archive(fixture_archive):
    path, digest = fixture_archive
    with serve_directory(path.parent) as served:
        yield served.url(path.name), digest


@pytest.fixture()
def flavor_copy(tmp_path):
    """A writable copy of os-image/e2b-ci, for breaking patches on purpose."""
    dst = tmp_path / "e2b-ci"
    shutil.copytree(FLAVOR_DIR, dst, symlinks=True)
    return dst
