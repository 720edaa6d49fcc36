"""The images the tests build, each built at most once per test session, and
the test recipes they are built from (test only).

The real envd release cannot be downloaded on our machines, so the tests pin
a stand-in and serve it from loopback, where build/pinfetch fetches it exactly
like a real pin: the Go stand-in in tests/envd-standin (it does envd's MMDS
flow).

The code-interpreter (e2b-ci) is built from the SHIPPED
recipes/code-interpreter.lock whenever a `git archive` of its pinned commit is
at hand: `../shared/upstream/code-interpreter-<commit>.tar.gz` beside the
repository (or in $E2B_UPSTREAM_DIR). It is then served as a pinfetch tree
mirror (file://DIR/tree/<hex of the tree pin>) with `pin_mirror=`, and
pinfetch verifies it against the shipped tree_sha256. Only where it is absent
do the tests fall back to the fixture tree tests/fixtures/code-interpreter,
packed like GitHub's archive and pinned by a test lock. The choice is printed
in pytest's summary (code_interpreter_source()).

One loopback server serves both for the whole session, so every recipes
directory written here names the same URLs, and two builds from them can be
compared byte for byte. tests/image, tests/image_ci and tests/boot share the
builds through image(): a full `make test` builds each flavor once (plus the
second build its reproducibility test needs).
"""
from __future__ import annotations

import atexit
import contextlib
import functools
import gzip
import hashlib
import http.server
import io
import json
import os
import pathlib
import shutil
import subprocess
import tarfile
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
CACHE = pathlib.Path(os.environ.get("E2B_IMAGE_CACHE", ROOT / "out" / "cache"))
BUILD_TIMEOUT = 60 * 60

FIXTURE = ROOT / "tests" / "fixtures" / "code-interpreter"
# A made-up commit id for the stand-in: it names the archive's top directory.
FIXTURE_COMMIT = "0" * 39 + "1"
FIXTURE_TOP = f"code-interpreter-{FIXTURE_COMMIT}"
SHIPPED_CI_LOCK = ROOT / "recipes" / "code-interpreter.lock"
UPSTREAM_DIR = pathlib.Path(os.environ.get("E2B_UPSTREAM_DIR", ROOT.parent / "shared" / "upstream"))


def lock_stanza(lock, name: str) -> dict:
    """One stanza of a lock, read by the one lock parser (build/pinfetch --json)."""
    cp = subprocess.run([str(ROOT / "build" / "pinfetch"), "--lock", str(lock), "--name", name, "--json"],
                        capture_output=True, text=True)
    if cp.returncode != 0:
        raise RuntimeError(f"cannot read [{name}] of {lock} (run `make tools`?): {cp.stderr.strip()}")
    return json.loads(cp.stdout)


def tree_pin_hex(sri: str) -> str:
    """The cache and mirror key of a tree pin: its digest in hex."""
    import base64
    assert sri.startswith("sha256-"), sri
    return base64.b64decode(sri[len("sha256-"):]).hex()


def tree_pin_of(archive) -> str:
    """The tree pin of an archive, by build/pinfetch --hash-tree (tests/pin
    checks that tool against Nix's own)."""
    cp = subprocess.run([str(ROOT / "build" / "pinfetch"), "--hash-tree", str(archive)],
                        capture_output=True, text=True, check=True)
    return cp.stdout.split()[0]


def upstream_archive() -> pathlib.Path | None:
    """The git archive of the shipped lock's commit, if it is at hand."""
    commit = lock_stanza(SHIPPED_CI_LOCK, "code-interpreter")["version"]
    p = UPSTREAM_DIR / f"code-interpreter-{commit}.tar.gz"
    return p if p.is_file() else None


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Served:
    def __init__(self, directory: pathlib.Path, port: int):
        self.dir = directory
        self.port = port
        self.base = f"http://127.0.0.1:{port}"

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


def _start_server(directory: pathlib.Path):
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop():
        server.shutdown()
        server.server_close()
        thread.join(5)
    return Served(directory, server.server_address[1]), stop


@contextlib.contextmanager
def serve_directory(directory: pathlib.Path):
    """A loopback HTTP server over DIRECTORY, on a free port, for the block."""
    served, stop = _start_server(directory)
    try:
        yield served
    finally:
        stop()


def build_standin(dest: pathlib.Path) -> str:
    """Builds the envd stand-in (reproducibly) at DEST; returns what its
    `-version` prints, newline included."""
    subprocess.run(["sh", str(ROOT / "tests" / "envd-standin" / "build.sh"), str(dest)],
                   check=True, capture_output=True, timeout=600)
    return subprocess.run([str(dest), "-version"], capture_output=True, text=True, check=True).stdout


def write_envd_lock(directory: pathlib.Path, url: str, sha256: str, version: str) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envd.lock").write_text(
        "# test only: the envd stand-in from tests/envd-standin, served from loopback\n"
        f"[envd]\nversion = {version}\nurl = {url}\nsha256 = {sha256}\n")
    return directory


class StandIns:
    """The session's stand-in artifacts, served from loopback until exit."""

    def __init__(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-standins-"))
        self.envd = self.dir / "envd"
        self.envd_version_output = build_standin(self.envd)
        self.envd_version = self.envd_version_output.strip()
        self.envd_sha256 = sha256_file(self.envd)
        self.upstream = upstream_archive()
        if self.upstream:
            # The shipped lock, and the archive where pinfetch looks for it on a tree mirror.
            lock = lock_stanza(SHIPPED_CI_LOCK, "code-interpreter")
            self.ci_commit = lock["version"]
            self.mirror = self.dir / "mirror"
            (self.mirror / "tree").mkdir(parents=True)
            shutil.copyfile(self.upstream, self.mirror / "tree" / tree_pin_hex(lock["tree_sha256"]))
            self.ci_source = (f"the shipped recipes/code-interpreter.lock, served from {self.upstream} "
                              f"through pin_mirror=file://{self.mirror}")
        else:
            self.ci_commit = FIXTURE_COMMIT
            self.mirror = None
            self.archive = self.dir / f"{FIXTURE_COMMIT}.tar.gz"
            self.archive.write_bytes(pack_fixture())
            self.archive_tree = tree_pin_of(self.archive)
            self.ci_source = (f"the fixture tests/fixtures/code-interpreter with a test lock "
                              f"({UPSTREAM_DIR}/code-interpreter-<commit>.tar.gz is absent)")
        self.served, self._stop = _start_server(self.dir)
        atexit.register(self.close)

    def close(self):
        if self._stop:
            self._stop()
            self._stop = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def recipes(self, flavor: str, directory: pathlib.Path | None = None) -> pathlib.Path:
        """A recipes= directory pinning the stand-ins FLAVOR needs."""
        d = directory or pathlib.Path(tempfile.mkdtemp(prefix=f"e2b-test-recipes-{flavor}-", dir=self.dir))
        write_envd_lock(d, self.served.url("envd"), self.envd_sha256, self.envd_version)
        if flavor == "e2b-ci" and self.upstream:
            shutil.copyfile(SHIPPED_CI_LOCK, d / "code-interpreter.lock")
        elif flavor == "e2b-ci":
            (d / "code-interpreter.lock").write_text(
                "# test only: the code-interpreter fixture, served from loopback\n"
                f"[code-interpreter]\nversion = {FIXTURE_COMMIT}\nurl = {self.served.url(self.archive.name)}\n"
                f"tree_sha256 = {self.archive_tree}\n")
        return d

    def make_args(self, flavor: str) -> list:
        """make variables FLAVOR's build needs beyond recipes=: the tree mirror."""
        return [f"pin_mirror=file://{self.mirror}"] if flavor == "e2b-ci" and self.mirror else []


@functools.lru_cache(maxsize=None)
def standins() -> StandIns:
    return StandIns()


def code_interpreter_source() -> str | None:
    """Which code-interpreter the session's e2b-ci builds use, once chosen."""
    return standins().ci_source if standins.cache_info().currsize else None


def make(flavor: str, out: pathlib.Path, *args, recipes: pathlib.Path | None = None,
         cache: pathlib.Path = CACHE, timeout: float = BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    """`make ARGS flavor=FLAVOR recipes=… out=OUT cache=…` with the stand-in
    recipes unless RECIPES is given; the result carries .seconds."""
    if recipes is None:
        recipes = standins().recipes(flavor)
        args = (*args, *standins().make_args(flavor))
    cmd = ["make", "-C", str(ROOT), "--no-print-directory", *args, f"flavor={flavor}",
           f"recipes={recipes}", f"out={out}", f"cache={cache}"]
    t0 = time.monotonic()
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    cp.seconds = time.monotonic() - t0
    return cp


class Built:
    """One build's outputs: DIR holds oci/, rootfs.ext4 and manifest.json."""

    def __init__(self, flavor: str, directory: pathlib.Path, cp: subprocess.CompletedProcess):
        self.flavor = flavor
        self.dir = directory
        self.out = directory.parent
        self.tree = directory / "work" / "mkosi-out" / "image"
        self.cp = cp
        self.seconds = cp.seconds
        self.ok = (directory / "manifest.json").exists() and (directory / "rootfs.ext4").exists()

    @property
    def manifest(self):
        return json.loads((self.dir / "manifest.json").read_text())

    def failure(self) -> str:
        return (f"{self.flavor}: build failed ({self.cp.returncode}):\n"
                f"{self.cp.stdout[-4000:]}\n{self.cp.stderr[-8000:]}")


@functools.lru_cache(maxsize=None)
def image(flavor: str) -> Built:
    """The session's build of FLAVOR, made on first use.

    e2b-rt: `make image` into out/test-image/ (tests/image builds a second
    one itself to compare). e2b-ci: `make image` into out/test-image-ci/; with
    upstream's whole Python stack two fresh e2b-ci builds cost more than
    `make test` can afford on a 2-core machine, so tests/image_ci checks the
    pack stage's determinism and `make repro flavor=e2b-ci` (two fresh builds)
    is a gate of the image workflow, ci/image.yml."""
    if flavor == "e2b-rt":
        out = ROOT / "out" / "test-image"
        shutil.rmtree(out, ignore_errors=True)
        return Built(flavor, out / flavor, make(flavor, out, "image"))
    if flavor == "e2b-ci":
        out = ROOT / "out" / "test-image-ci"
        shutil.rmtree(out, ignore_errors=True)
        return Built(flavor, out / flavor, make(flavor, out, "image"))
    raise ValueError(f"unknown flavor {flavor!r}")


if __name__ == "__main__":
    # By hand: python3 tests/testimages.py FLAVOR OUT [make targets and variables…]
    import sys
    if len(sys.argv) < 3:
        sys.exit("usage: testimages.py FLAVOR OUT [make targets and variables…]")
    cp = make(sys.argv[1], pathlib.Path(sys.argv[2]).resolve(), *sys.argv[3:])
    sys.stdout.write(cp.stdout)
    sys.stderr.write(cp.stderr)
    if sys.argv[1] == "e2b-ci":
        print(f"e2b-ci code-interpreter: {standins().ci_source}; {cp.seconds:.0f}s", file=sys.stderr)
    standins().close()
    sys.exit(cp.returncode)
