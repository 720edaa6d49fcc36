"""A real e2b-ci build (mkosi, packing) with the stand-in recipes, built
twice by `make repro flavor=e2b-ci`: identical digests; then the first
build's tree is checked and the code-interpreter stack is started from it.

The stand-ins (envd: tests/envd-standin; code-interpreter archive:
tests/fixtures/code-interpreter) are served from loopback and pinned in a
temporary recipes= directory (testbuild.py); package caches are the
repository's (out/cache), shared with tests/image.
"""
import configparser
import json
import os
import pathlib
import shutil
import subprocess
import time

import pytest

import testbuild
from conftest import ROOT, run

OUT = ROOT / "out" / "test-image-ci"
CACHE = pathlib.Path(os.environ.get("E2B_IMAGE_CACHE", ROOT / "out" / "cache"))


class Repro:
    def __init__(self, cp, seconds):
        self.cp = cp
        self.seconds = seconds
        self.first = OUT / "repro" / "e2b-ci" / "1"
        self.tree = self.first / "work" / "mkosi-out" / "image"


@pytest.fixture(scope="module")
def repro():
    if os.geteuid() != 0:
        pytest.skip("image builds need root")
    shutil.rmtree(OUT, ignore_errors=True)
    t0 = time.monotonic()
    cp = testbuild.make(OUT, "repro", extra=[f"cache={CACHE}"], timeout=60 * 60)
    r = Repro(cp, time.monotonic() - t0)
    if not (r.first / "manifest.json").exists():
        pytest.fail(f"make repro flavor=e2b-ci: no first build ({cp.returncode}):\n"
                    f"{cp.stdout[-4000:]}\n{cp.stderr[-8000:]}")
    return r


@pytest.fixture(scope="module")
def tree(repro):
    return repro.tree


def test_make_repro_gives_identical_digests(repro):
    assert repro.cp.returncode == 0, repro.cp.stdout[-6000:] + repro.cp.stderr[-6000:]
    assert "repro: identical" in repro.cp.stdout


def unit(tree, name):
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    text = (tree / "usr/lib/systemd/system" / name).read_text()
    p.read_string(text)
    return p


def test_units_present_enabled_and_ordered(tree):
    for name in ("jupyter.service", "code-interpreter.service"):
        shipped = tree / "usr/lib/systemd/system" / name
        assert shipped.read_text() == (ROOT / "units" / name).read_text()
        wants = tree / "etc/systemd/system/multi-user.target.wants" / name
        assert wants.is_symlink(), f"{name} is not enabled"
        assert os.readlink(wants).endswith(f"/systemd/system/{name}")
        u = unit(tree, name)
        assert "envd-guard.service" in u["Unit"]["Requires"].split()
        assert "envd-guard.service" in u["Unit"]["After"].split()
    ci = unit(tree, "code-interpreter.service")
    assert "jupyter.service" in ci["Unit"]["Requires"].split()
    assert "jupyter.service" in ci["Unit"]["After"].split()
    assert ci["Unit"]["PartOf"] == "jupyter.service"
    # The guard the units require is there, and enabled.
    assert (tree / "usr/lib/systemd/system/envd-guard.service").is_file()
    assert (tree / "etc/systemd/system/multi-user.target.wants/envd-guard.service").is_symlink() or \
        any((tree / "etc/systemd/system").glob("*.wants/envd-guard.service"))


def test_code_interpreter_laid_out_patched_and_licensed(tree):
    prefix = tree / "usr/lib/e2b-code-interpreter"
    assert "/api/kernelspecs" in (prefix / "server/main.py").read_text()
    assert (prefix / "python/e2b_charts/__init__.py").is_file()
    assert not (prefix / "source.tar.gz").exists()
    # Bytecode, hash-based and unchecked: no source mtimes inside.
    pyc = sorted((prefix / "server/__pycache__").glob("main.*.pyc"))
    assert pyc, "no bytecode for the server"
    flags = int.from_bytes(pyc[0].read_bytes()[4:8], "little")
    assert flags == 0b01, f"{pyc[0].name}: pyc flags {flags:#x}, expected unchecked-hash (0x1)"
    doc = tree / "usr/share/doc/e2b-code-interpreter"
    assert (doc / "LICENSE").is_file() and (doc / "PATCHES").is_file()
    cfg = (tree / "etc/jupyter/jupyter_server_config.py").read_text()
    assert 'c.ServerApp.ip = "127.0.0.1"' in cfg
    # Python kernel only.
    kernels = sorted(p.name for p in (tree / "usr/share/jupyter/kernels").iterdir())
    assert kernels == ["python3"]


def test_manifest_lists_the_archive_pin(repro):
    m = json.loads((repro.first / "manifest.json").read_text())
    text = json.dumps(m)
    assert testbuild.FIXTURE_COMMIT in text
    pkgs = text
    for name in ("python3-jupyter-server", "python3-ipykernel", "python3-fastapi", "python3-uvicorn"):
        assert name in pkgs


def test_stack_from_the_built_tree_serves_health_on_loopback_only(tree):
    """Jupyter and the API server started from the image tree (chroot as uid
    1000, private network namespace): /health is "OK" on 127.0.0.1:49999, the
    default python context exists (no javascript one), and nothing listens
    on a non-loopback address."""
    script = ROOT / "tests/image_ci/run_stack.sh"
    cp = run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc", script, tree], timeout=300)
    assert cp.returncode == 0, cp.stdout[-4000:] + cp.stderr[-4000:]
    out = cp.stdout
    assert 'HEALTH "OK"' in out
    contexts = json.loads(out.split("CONTEXTS ", 1)[1].splitlines()[0])
    assert [c["language"] for c in contexts] == ["python"]
    listeners = [l.split() for l in out.split("LISTEN-BEGIN\n", 1)[1].split("LISTEN-END")[0].splitlines() if l.strip()]
    local = {l[3] for l in listeners}
    assert "127.0.0.1:8888" in local and "127.0.0.1:49999" in local
    for addr in local:
        assert addr.startswith("127.") or addr.startswith("[::1]"), f"non-loopback listener {addr}"
