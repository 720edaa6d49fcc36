"""Helpers and fixtures for the image tests (tests/image/): the envd test stand-in, served from loopback
and pinned in a test lock, and one real e2b-rt build (session scope).

The real envd release cannot be downloaded on our machines, so the build uses
recipes=<tmp> whose envd.lock points at the stand-in (tests/envd-standin/,
built here, never shipped). The package caches are the repository's
(out/cache), so builds after the first are warm.
"""
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import testimages  # noqa: E402
from testimages import CACHE, ROOT, sha256_file  # noqa: E402,F401  (re-exported)
from harness import free_port  # noqa: E402,F401  (re-exported)

FLAVOR = "e2b-rt"
BUILD_TIMEOUT = testimages.BUILD_TIMEOUT


def write_lock(directory: pathlib.Path, url: str, sha256: str, version="0.8.0") -> pathlib.Path:
    return testimages.write_envd_lock(directory, url, sha256, version)


def make_image(out: pathlib.Path, recipes: pathlib.Path, *extra, target="image",
               cache=CACHE, timeout=BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    return testimages.make(FLAVOR, out, target, *extra, recipes=recipes, cache=cache, timeout=timeout)


# Fixtures. Test modules import them by name (no conftest.py per folder: see
# tests/harness.py).

@pytest.fixture(scope="session")
def standin():
    """The envd stand-in binary, built reproducibly; (path, version output)."""
    s = testimages.standins()
    return s.envd, s.envd_version_output


@pytest.fixture(scope="session")
def artifact_server():
    """The session's HTTP server on 127.0.0.1, serving the stand-in at /envd."""
    return testimages.standins().served.base


@pytest.fixture(scope="session")
def test_recipes(tmp_path_factory):
    return testimages.standins().recipes(FLAVOR, tmp_path_factory.mktemp("recipes"))


@pytest.fixture(scope="session")
def built():
    """The session's one real build of e2b-rt (mkosi, packing) with the stand-in
    recipes, shared with tests/boot through tests/testimages.py."""
    b = testimages.image(FLAVOR)
    if not b.ok or b.cp.returncode != 0:
        pytest.fail(b.failure())
    return b
