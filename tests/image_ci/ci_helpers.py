"""Helpers for the e2b-ci flavor's tests (tests/image_ci), under a module
name no other test folder uses (they share sys.path). Test modules import
the fixtures below by name.

These tests pack the stand-in under tests/fixtures/code-interpreter (our own
code, upstream's layout) into a tarball shaped like GitHub's archive of a
commit, serve it from loopback, and fetch its tree through build/pinfetch.
(The image build itself uses the real pinned tree where it is at hand: see
tests/testimages.py.)
"""
import base64
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import testimages  # noqa: E402
from testimages import (  # noqa: E402,F401  (re-exported for the test modules)
    FIXTURE, FIXTURE_COMMIT, FIXTURE_TOP, ROOT, pack_fixture, serve_directory, tree_pin_of,
)

FLAVOR_DIR = ROOT / "os-image" / "e2b-ci"


def e2b_ci_build():
    """The session's e2b-ci build (tests/testimages.py): skips without root,
    fails naming the build's output if it failed."""
    if os.geteuid() != 0:
        pytest.skip("image builds need root")
    b = testimages.image("e2b-ci")
    if not b.ok:
        pytest.fail(b.failure())
    return b


def run(cmd, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    return subprocess.run([str(c) for c in cmd], **kw)


def unpack(archive, dest):
    """The archive's tree, its top directory stripped (test only: in a build,
    pinfetch unpacks and verifies it; test_ci_patches checks that path)."""
    pathlib.Path(dest).mkdir(parents=True)
    run(["tar", "-xzf", archive, "-C", dest, "--strip-components=1"]).check_returncode()
    return dest


def prepare(archive, extra, work, flavor_dir=FLAVOR_DIR, env=None):
    e = dict(os.environ)
    e.pop("PYDEPS", None)
    e.update(env or {})
    source = unpack(archive, pathlib.Path(work).parent / (pathlib.Path(work).name + "-source"))
    return run([flavor_dir / "prepare.sh", "--source", source, "--extra", extra, "--work", work], env=e)


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
    """(url, sha256, tree_sha256) of the stand-in archive, served from loopback."""
    path, digest = fixture_archive
    with serve_directory(path.parent) as served:
        yield served.url(path.name), digest, tree_pin_of(path)


@pytest.fixture()
def flavor_copy(tmp_path):
    """A writable copy of os-image/e2b-ci, for breaking patches on purpose."""
    dst = tmp_path / "e2b-ci"
    shutil.copytree(FLAVOR_DIR, dst, symlinks=True)
    return dst


def make_wheel(directory, name="e2b_ci_probe", version="1.0", requires=()):
    """A minimal pure-Python wheel, built here (no index needed): (path, sha256)."""
    files = {
        f"{name}/__init__.py": b"OK = 'e2b-ci probe'\n",
        f"{name}-{version}.dist-info/METADATA":
            (f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n"
             + "".join(f"Requires-Dist: {r}\n" for r in requires)).encode(),
        f"{name}-{version}.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: e2b-images tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = f"{name}-{version}.dist-info/RECORD"
    lines = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{path},sha256={digest},{len(data)}")
    lines.append(f"{record},,")
    files[record] = ("\n".join(lines) + "\n").encode()
    wheel = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(zipfile.ZipInfo(path, (2020, 1, 1, 0, 0, 0)), data)
    return wheel, hashlib.sha256(wheel.read_bytes()).hexdigest()
