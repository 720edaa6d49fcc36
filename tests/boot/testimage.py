"""Builds out/<flavor>/ with the tests' recipes, for the boot test (test only).

The real envd release and code-interpreter archive cannot be downloaded here,
so, like the image tests, this pins test stand-ins served from loopback:
- envd: the Go stand-in (tests/envd-standin), which does envd's MMDS flow;
- code-interpreter (e2b-ci): the fixture tree tests/fixtures/code-interpreter,
  packed like GitHub's archive (tests/image_ci/ci_helpers.py:pack_fixture).
Both go through build/pinfetch like real pins; then `make flavor=... recipes=...`.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import importlib.util
import pathlib
import subprocess
import tempfile
import threading

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What the image depends on: newer sources than rootfs.ext4 mean a rebuild.
SOURCES = ["os-image", "units", "guard", "mmds", "pin", "common", "tests/envd-standin",
           "tests/fixtures/code-interpreter", "constraints"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def _serve(directory: pathlib.Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Quiet, directory=str(directory)))
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        t.join(5)


def _sha256(p: pathlib.Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _pack_fixture():
    spec = importlib.util.spec_from_file_location("e2b_boot_ci_helpers", ROOT / "tests" / "image_ci" / "ci_helpers.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.pack_fixture(), mod.FIXTURE_COMMIT


def stale(rootfs: pathlib.Path) -> bool:
    if not rootfs.exists():
        return True
    built = rootfs.stat().st_mtime
    for s in SOURCES:
        p = ROOT / s
        files = [p] if p.is_file() else (p.rglob("*") if p.exists() else [])
        if any(f.is_file() and f.stat().st_mtime > built for f in files):
            return True
    return False


def build(flavor: str, out: pathlib.Path, timeout: float = 3600) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="e2b-boot-recipes-") as tmp:
        tmp = pathlib.Path(tmp)
        srv, recipes = tmp / "srv", tmp / "recipes"
        srv.mkdir()
        recipes.mkdir()
        subprocess.run(["sh", str(ROOT / "tests" / "envd-standin" / "build.sh"), str(srv / "envd")],
                       check=True, capture_output=True, timeout=600)
        version = subprocess.run([str(srv / "envd"), "-version"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        with _serve(srv) as base:
            (recipes / "envd.lock").write_text(
                f"# test only: the envd stand-in, served from loopback\n[envd]\nversion = {version}\n"
                f"url = {base}/envd\nsha256 = {_sha256(srv / 'envd')}\n")
            if flavor == "e2b-ci":
                data, commit = _pack_fixture()
                (srv / f"{commit}.tar.gz").write_bytes(data)
                (recipes / "code-interpreter.lock").write_text(
                    f"# test only: the code-interpreter fixture, served from loopback\n"
                    f"[code-interpreter]\nversion = {commit}\nurl = {base}/{commit}.tar.gz\n"
                    f"sha256 = {hashlib.sha256(data).hexdigest()}\n")
            return subprocess.run(["make", "--no-print-directory", f"flavor={flavor}", f"recipes={recipes}",
                                   f"out={out}"], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
