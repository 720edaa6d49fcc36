"""The images the tests build, each built at most once per test session, and
the pinned sources they are built from.

envd is the REAL envd, built from source exactly as `make` builds it
(envd=source, os-image/envd-source.sh): the shipped recipes/envd.lock pins
e2b-dev/infra at the tag envd-v0.6.13 by its unpacked tree, and GitHub cannot
be reached from our machines, so the tag's `git archive`
(`../shared/upstream/infra-<commit>.tar.gz`, or in $E2B_UPSTREAM_DIR) is put
on a pinfetch tree mirror (file://DIR/tree/<hex of the tree pin>) and passed
with `pin_mirror=`, where pinfetch verifies it against the shipped pin. The
tests that exercise envd=release (a pinned binary fetched by its sha256)
serve that same real envd from loopback, pinned in a test lock.

The code-interpreter (e2b-ci) is built from the SHIPPED
recipes/code-interpreter.lock the same way whenever a `git archive` of its
pinned commit is at hand (`code-interpreter-<commit>.tar.gz` beside the
other). Only where it is absent do the tests fall back to the fixture tree
tests/fixtures/code-interpreter, packed like GitHub's archive and pinned by a
test lock. The choice is printed in pytest's summary
(code_interpreter_source()).

tests/image, tests/image_ci, tests/sdk and tests/boot share the builds through
image(): a full `make test` builds each flavor once (plus the second build
its reproducibility test needs).
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
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
SOURCE_NOTE = ROOT / "out" / "test-code-interpreter-source.txt"

SHIPPED_RECIPES = ROOT / "recipes"
SHIPPED_ENVD_LOCK = SHIPPED_RECIPES / "envd.lock"
FIXTURE = ROOT / "tests" / "fixtures" / "code-interpreter"
# A made-up commit id for the stand-in: it names the archive's top directory.
FIXTURE_COMMIT = "0" * 39 + "1"
FIXTURE_TOP = f"code-interpreter-{FIXTURE_COMMIT}"
SHIPPED_CI_LOCK = ROOT / "recipes" / "code-interpreter.lock"
SHIPPED_IJS_LOCK = ROOT / "recipes" / "ijavascript.lock"
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
    """The git archive of the shipped code-interpreter lock's commit, if it is at hand."""
    commit = lock_stanza(SHIPPED_CI_LOCK, "code-interpreter")["version"]
    p = UPSTREAM_DIR / f"code-interpreter-{commit}.tar.gz"
    return p if p.is_file() else None


def ijavascript_archives() -> dict[str, pathlib.Path]:
    """The git archives of recipes/ijavascript.lock's three trees that are at
    hand, by stanza name (ijavascript, nel, ijavascript-babel)."""
    found = {}
    for name in ("ijavascript", "nel", "ijavascript-babel"):
        p = UPSTREAM_DIR / f"{name}-{lock_stanza(SHIPPED_IJS_LOCK, name)['version']}.tar.gz"
        if p.is_file():
            found[name] = p
    return found


def envd_source_archive() -> pathlib.Path:
    """The git archive of the commit the shipped [envd-source] pins; without it
    envd cannot be built here (GitHub is unreachable), so nothing can."""
    commit = lock_stanza(SHIPPED_ENVD_LOCK, "envd-source")["commit"]
    p = UPSTREAM_DIR / f"infra-{commit}.tar.gz"
    if not p.is_file():
        raise RuntimeError(f"{p} is absent: envd's pinned source (e2b-dev/infra @ {commit}) cannot be had "
                           f"(set E2B_UPSTREAM_DIR to a folder holding a `git archive` of that commit)")
    return p


def masked(kind: str = "system") -> list[str]:
    """What the image masks (os-image/README.md): the names in
    os-image/mkosi.extra/etc/systemd/KIND linked to /dev/null; KIND is
    "system" (units) or "system-generators"."""
    d = ROOT / "os-image" / "mkosi.extra" / "etc" / "systemd" / kind
    return sorted(p.name for p in d.iterdir() if p.is_symlink() and os.readlink(p) == "/dev/null")


def make_var(name: str) -> str:
    """A make knob's default, as the Makefile sets it (make print-NAME)."""
    return subprocess.run(["make", "-s", "-C", str(ROOT), "--no-print-directory", f"print-{name}"],
                          capture_output=True, text=True, check=True).stdout.strip()


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


def write_envd_lock(directory: pathlib.Path, url: str, sha256: str, version: str) -> pathlib.Path:
    """A recipes= directory whose envd.lock pins a release-style envd binary
    (for envd=release) at URL."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "envd.lock").write_text(
        "# test only: envd=release, the real envd (built from source) served from loopback\n"
        f"[envd]\nversion = {version}\nurl = {url}\nsha256 = {sha256}\n")
    return directory


def build_envd_from_source(mirror: pathlib.Path, dest: pathlib.Path, cache: pathlib.Path = CACHE) -> dict:
    """The real envd, built by os-image/envd-source.sh from the shipped pin
    (through MIRROR, into the build cache CACHE, so `make` finds it there
    too), copied to DEST; returns its build record."""
    info = dest.with_suffix(".json")
    env = dict(os.environ, TOOLS=str(ROOT / "build"), CACHE=str(cache), PYTHON="/usr/bin/python3",
               GO_TOOLCHAIN=make_var("go_toolchain"), OFFLINE="0")
    # One build at a time per cache: make test's two workers (pytest-xdist)
    # may both ask at once, and the second then finds it in the cache.
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".envd-source.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cp = subprocess.run(["bash", str(ROOT / "os-image" / "envd-source.sh"), str(SHIPPED_ENVD_LOCK),
                             "envd-source", str(dest), str(info), "--cache", str(cache / "pinfetch"),
                             "--mirror", f"file://{mirror}"],
                            env=env, capture_output=True, text=True, timeout=1800)
    if cp.returncode != 0:
        raise RuntimeError(f"envd from source failed ({cp.returncode}): {cp.stderr[-3000:]}")
    return json.loads(info.read_text())


def fill_pin_mirror(mirror: pathlib.Path) -> None:
    """MIRROR/tree/<hex>: the upstream archives at hand under their shipped tree
    pins, a pinfetch mirror for pin_mirror=file://MIRROR (the tests' and the
    benches' way to build without GitHub)."""
    (mirror / "tree").mkdir(parents=True, exist_ok=True)
    envd_pin = lock_stanza(SHIPPED_ENVD_LOCK, "envd-source")
    shutil.copyfile(envd_source_archive(), mirror / "tree" / tree_pin_hex(envd_pin["tree_sha256"]))
    ci = upstream_archive()
    if ci:
        ci_pin = lock_stanza(SHIPPED_CI_LOCK, "code-interpreter")
        shutil.copyfile(ci, mirror / "tree" / tree_pin_hex(ci_pin["tree_sha256"]))
    for name, archive in ijavascript_archives().items():
        pin = lock_stanza(SHIPPED_IJS_LOCK, name)["tree_sha256"]
        shutil.copyfile(archive, mirror / "tree" / tree_pin_hex(pin))


class Sources:
    """The session's pinned sources: the upstream archives on a file:// pin
    mirror, and the real envd built from them, served from loopback until
    exit (for envd=release)."""

    def __init__(self):
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-sources-"))
        self.mirror = self.dir / "mirror"
        fill_pin_mirror(self.mirror)
        self.served_dir = self.dir / "served"
        self.served_dir.mkdir()
        self.envd = self.served_dir / "envd"
        self.envd_build = build_envd_from_source(self.mirror, self.envd)
        self.envd_version = self.envd_build["built_from"]["version"]
        self.envd_version_output = self.envd_version + "\n"
        self.envd_sha256 = sha256_file(self.envd)
        self.upstream = upstream_archive()
        if self.upstream:
            self.ci_commit = lock_stanza(SHIPPED_CI_LOCK, "code-interpreter")["version"]
            self.ci_source = (f"the shipped recipes/code-interpreter.lock, served from {self.upstream} "
                              f"through pin_mirror=file://{self.mirror}")
        else:
            self.ci_commit = FIXTURE_COMMIT
            self.archive = self.served_dir / f"{FIXTURE_COMMIT}.tar.gz"
            self.archive.write_bytes(pack_fixture())
            self.archive_tree = tree_pin_of(self.archive)
            self.ci_source = (f"the fixture tests/fixtures/code-interpreter with a test lock "
                              f"({UPSTREAM_DIR}/code-interpreter-<commit>.tar.gz is absent)")
        # For pytest's summary, which the controlling process prints (conftest.py).
        SOURCE_NOTE.parent.mkdir(parents=True, exist_ok=True)
        SOURCE_NOTE.write_text(self.ci_source + "\n")
        self.served, self._stop = _start_server(self.served_dir)
        atexit.register(self.close)

    def close(self):
        if self._stop:
            self._stop()
            self._stop = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def recipes(self, flavor: str, directory: pathlib.Path | None = None) -> pathlib.Path:
        """The recipes= directory FLAVOR builds from: the shipped one, or a copy
        with the fixture's code-interpreter lock where upstream's archive is absent."""
        if flavor != "e2b-ci" or self.upstream:
            return SHIPPED_RECIPES
        d = directory or pathlib.Path(tempfile.mkdtemp(prefix=f"e2b-test-recipes-{flavor}-", dir=self.dir))
        shutil.copyfile(SHIPPED_ENVD_LOCK, d / "envd.lock")
        (d / "code-interpreter.lock").write_text(
            "# test only: the code-interpreter fixture, served from loopback\n"
            f"[code-interpreter]\nversion = {FIXTURE_COMMIT}\nurl = {self.served.url(self.archive.name)}\n"
            f"tree_sha256 = {self.archive_tree}\n")
        return d

    def make_args(self, flavor: str) -> list:
        """make variables every build needs beyond recipes=: the tree mirror."""
        return [f"pin_mirror=file://{self.mirror}"]


@functools.lru_cache(maxsize=None)
def sources() -> Sources:
    return Sources()


def code_interpreter_source() -> str | None:
    """Which code-interpreter the session's e2b-ci builds use, once chosen
    (in this process, or in a pytest-xdist worker of this run)."""
    if sources.cache_info().currsize:
        return sources().ci_source
    return SOURCE_NOTE.read_text().strip() if SOURCE_NOTE.is_file() else None


def make(flavor: str, out: pathlib.Path, *args, recipes: pathlib.Path | None = None,
         cache: pathlib.Path | None = None, timeout: float = BUILD_TIMEOUT, env: dict | None = None,
         **popen) -> subprocess.CompletedProcess:
    """`make ARGS flavor=FLAVOR recipes=… out=OUT cache=…` with the session's
    recipes and pin mirror unless RECIPES is given; the result carries .seconds.
    CACHE: CACHE, or e2b-base's own (base_cache). POPEN: more of
    subprocess.run's arguments (stdin, pass_fds, ...)."""
    if cache is None:
        cache = base_cache() if flavor == "e2b-base" else CACHE
    if recipes is None:
        recipes = sources().recipes(flavor)
        args = (*args, *sources().make_args(flavor))
    cmd = ["make", "-C", str(ROOT), "--no-print-directory", *args, f"flavor={flavor}",
           f"recipes={recipes}", f"out={out}", f"cache={cache}"]
    t0 = time.monotonic()
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **popen)
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


def skopeo_labels(oci_dir: pathlib.Path) -> tuple[dict, dict]:
    """An OCI layout's labels (config, `skopeo inspect`) and its manifest's
    annotations (`skopeo inspect --raw`), as a control plane reads them."""
    ref = f"oci:{oci_dir}:latest"
    inspect = subprocess.run(["skopeo", "inspect", ref], capture_output=True, text=True, check=True)
    raw = subprocess.run(["skopeo", "inspect", "--raw", ref], capture_output=True, text=True, check=True)
    return json.loads(inspect.stdout)["Labels"], json.loads(raw.stdout)["annotations"]


def check_labels(built: "Built", name: str, flavor: str, vsock_ports: str) -> dict:
    """The labels every image carries (os-image/labels.py), read back with
    skopeo and checked against the image's own files; returns them."""
    labels, annotations = skopeo_labels(built.dir / "oci")
    assert labels == annotations
    m = built.manifest
    assert m["labels"] == labels
    oci = "org.opencontainers.image."
    for k in ("title", "description", "version", "revision", "created", "licenses", "base.name", "base.digest"):
        assert labels.get(oci + k), f"{oci + k} missing: {labels}"
    assert labels[oci + "title"] == name
    assert labels[oci + "created"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(m["source_date_epoch"]))
    assert labels[oci + "revision"] == subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                      capture_output=True, text=True).stdout.strip()
    ours = "org.e2b-images."
    # The control plane's envd version is the one in the same image.
    assert labels[ours + "envd-version"] == (built.tree / "etc/envd-version").read_text().strip()
    assert labels[ours + "name"] == name and labels[ours + "flavor"] == flavor
    assert labels[ours + "guarded-ports"] == "49983,49999,8888"
    assert labels[ours + "vsock-ports"] == vsock_ports
    # The kernels, read from the image's kernelspecs: the manifest's list; none for e2b-rt.
    assert labels.get(ours + "kernels", "") == ",".join(m.get("kernels", []))
    assert flavor == "e2b-ci" or "kernels" not in m
    assert int(labels[ours + "vcpu"]) >= 1 and int(labels[ours + "memory-mb"]) >= 128
    assert labels[ours + "ready"].split()[0] in ("port", "url", "process", "file", "command")
    assert int(labels[ours + "ready-timeout"]) >= 1
    return labels


@functools.lru_cache(maxsize=None)
def image(flavor: str) -> Built:
    """The session's build of FLAVOR, made on first use.

    e2b-rt: `make image` into out/test-image/ (tests/image builds a second
    one itself to compare). e2b-ci: `make image` into out/test-image-ci/; with
    upstream's whole Python stack two fresh e2b-ci builds cost more than
    `make test` can afford on a 2-core machine, so tests/image_ci checks the
    pack stage's determinism and `make repro flavor=e2b-ci` (two fresh builds)
    is a gate of the image workflow, ci/image.yml. e2b-base: into
    out/test-image-base/ with caches of its own, once per run whichever
    worker asks first (shared_build)."""
    if flavor == "e2b-rt":
        out = ROOT / "out" / "test-image"
        shutil.rmtree(out, ignore_errors=True)
        return Built(flavor, out / flavor, make(flavor, out, "image"))
    if flavor == "e2b-ci":
        out = ROOT / "out" / "test-image-ci"
        shutil.rmtree(out, ignore_errors=True)
        return Built(flavor, out / flavor, make(flavor, out, "image"))
    if flavor == "e2b-base":
        return shared_build(flavor, ROOT / "out" / "test-image-base")
    raise ValueError(f"unknown flavor {flavor!r}")


def shared_build(flavor: str, out: pathlib.Path) -> Built:
    """FLAVOR built once per run into OUT, whichever pytest-xdist worker asks
    first (make test builds e2b-base on the second worker and boots it on
    the first): under a lock beside OUT, a build of this run (the same
    PYTEST_XDIST_TESTRUNUID, recorded with its log) is taken as it is. The
    cache is FLAVOR's (make's default: base_cache for e2b-base)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid-{os.getpid()}"
    record = out / "test-build.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.with_name(out.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            done = json.loads(record.read_text())
        except (OSError, ValueError):
            done = {}
        if done.get("run") == run:
            cp = subprocess.CompletedProcess(done["args"], done["returncode"], done["stdout"], done["stderr"])
            cp.seconds = done["seconds"]
            return Built(flavor, out / flavor, cp)
        shutil.rmtree(out, ignore_errors=True)
        cp = make(flavor, out, "image")
        out.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps({"run": run, "args": cp.args, "returncode": cp.returncode, "stdout": cp.stdout,
                                      "stderr": cp.stderr, "seconds": cp.seconds}))
        return Built(flavor, out / flavor, cp)


def base_cache() -> pathlib.Path:
    """e2b-base's cache= for the tests: make test builds it on the second
    worker, beside the first worker's builds, so mkosi's package cache and
    incremental image are its own (two apt runs must not share one archive
    directory). What is safe to share is shared: pinfetch's cache and Go's
    (each written atomically or under Go's own locks) and envd's source
    build (made once, under Sources' lock, before any build)."""
    cache = CACHE.parent / "test-cache-base"
    cache.mkdir(parents=True, exist_ok=True)
    for shared in ("pinfetch", "go", "envd-source", "npm"):
        (CACHE / shared).mkdir(parents=True, exist_ok=True)
        link = cache / shared
        if not link.is_symlink():
            shutil.rmtree(link, ignore_errors=True)
            link.symlink_to(CACHE / shared)
    return cache


EXAMPLES = ROOT / "examples" / "templates"


def build_template(directory: pathlib.Path, base: str, out: pathlib.Path, *args) -> subprocess.CompletedProcess:
    """`make image template=DIRECTORY out=OUT` with the session's recipes for
    BASE (the template's base flavor); its outputs go to OUT/<name>/. On
    e2b-base, after the session's build of it (another worker may be making
    it), whose cache the template's build then starts from. ARGS: more
    make variables."""
    if base == "e2b-base":
        image("e2b-base")
    return make(base, out, "image", f"template={directory}", *args)


def copy_built(tmp_path_factory, src: pathlib.Path, base: str = "e2b-rt", ignore=None, prepare=None) -> Built:
    """A copy of the template folder SRC (less IGNORE, shutil.copytree's;
    then PREPARE(copy), e.g. writing its JSON) built on BASE into a fresh
    out= folder, for a test module's fixture; a failed build fails the test."""
    import pytest
    d = tmp_path_factory.mktemp(src.name) / src.name
    shutil.copytree(src, d, ignore=ignore)
    if prepare:
        prepare(d)
    out = tmp_path_factory.mktemp(f"{src.name}-out")
    b = Built(base, out / src.name, build_template(d, base, out))
    if not b.ok:
        pytest.fail(b.failure())
    return b


@functools.lru_cache(maxsize=None)
def template_image(name: str, base: str) -> Built:
    """The session's build of examples/templates/NAME (on BASE, a flavor the
    tests build anyway, so mkosi's cached installation is warm), into
    out/test-templates/NAME/."""
    out = ROOT / "out" / "test-templates"
    shutil.rmtree(out / name, ignore_errors=True)
    return Built(base, out / name, build_template(EXAMPLES / name, base, out))


if __name__ == "__main__":
    # By hand: python3 tests/testimages.py FLAVOR OUT [make targets and variables…]
    import sys
    if len(sys.argv) < 3:
        sys.exit("usage: testimages.py FLAVOR OUT [make targets and variables…]")
    cp = make(sys.argv[1], pathlib.Path(sys.argv[2]).resolve(), *sys.argv[3:])
    sys.stdout.write(cp.stdout)
    sys.stderr.write(cp.stderr)
    if sys.argv[1] == "e2b-ci":
        print(f"e2b-ci code-interpreter: {sources().ci_source}; {cp.seconds:.0f}s", file=sys.stderr)
    sources().close()
    sys.exit(cp.returncode)


# e2b-ci's kernels (build.sh's kernels=, upstream's make_template order) and
# the kernelspec name upstream's server asks Jupyter for, for each.
CI_KERNELS = {"python": "python3", "javascript": "javascript", "r": "r", "bash": "bash", "java": "java"}
# Jupyter's data path in an e2b-ci tree, first match wins (the venv's, then the system's).
CI_KERNELSPEC_DIRS = ("usr/lib/e2b-code-interpreter/venv/share/jupyter/kernels",
                      "usr/local/share/jupyter/kernels", "usr/share/jupyter/kernels")


def ci_kernelspecs(tree: pathlib.Path) -> dict:
    """TREE's kernelspecs on Jupyter's path, by name: the parsed kernel.json
    of the first directory that has one (as `jupyter kernelspec list`)."""
    specs = {}
    for d in CI_KERNELSPEC_DIRS:
        for spec in sorted((tree / d).glob("*/kernel.json")):
            specs.setdefault(spec.parent.name, json.loads(spec.read_text()))
    return specs


def ci_kernels(tree: pathlib.Path) -> list:
    """The kernels= names TREE serves, in build.sh's order, from its kernelspecs."""
    specs = ci_kernelspecs(tree)
    return [k for k, spec in CI_KERNELS.items() if spec in specs]


# The SDK languages each kernel serves (upstream's server sends ts to javascript).
CI_LANGUAGE_KERNEL = {"python": "python", "js": "javascript", "ts": "javascript", "r": "r", "bash": "bash",
                      "java": "java"}


def ci_languages(kernels) -> list:
    """The SDK languages beside python that KERNELS (kernels= names) serve."""
    return [lang for lang, kernel in CI_LANGUAGE_KERNEL.items() if kernel in kernels and lang != "python"]
