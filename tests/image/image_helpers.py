"""Helpers and fixtures for the image tests (tests/image/): the real envd
built from its pinned source (tests/testimages.py), and one real e2b-rt build
(session scope) with the shipped recipes.

envd=release needs a binary pinned by its sha256: the release itself cannot be
downloaded on our machines, so those tests serve the real envd (built from
source) from loopback and pin it in a test lock (write_release_lock). The
package caches are the repository's (out/cache), so builds after the first
are warm.
"""
import configparser
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


def write_release_lock(directory: pathlib.Path, url: str, sha256: str, version="0.6.13") -> pathlib.Path:
    """recipes= for envd=release: [envd] pins the binary at URL by SHA256."""
    return testimages.write_envd_lock(directory, url, sha256, version)


def make_image(out: pathlib.Path, recipes: pathlib.Path, *extra, target="image",
               cache=CACHE, timeout=BUILD_TIMEOUT) -> subprocess.CompletedProcess:
    return testimages.make(FLAVOR, out, target, *extra, recipes=recipes, cache=cache, timeout=timeout)


def make_release_image(out: pathlib.Path, recipes: pathlib.Path, *extra, **kw) -> subprocess.CompletedProcess:
    """make with envd=release and RECIPES (a release lock)."""
    return make_image(out, recipes, "envd=release", *extra, **kw)


# Fixtures. Test modules import them by name (no conftest.py per folder: see
# tests/harness.py).

@pytest.fixture(scope="session")
def real_envd():
    """The real envd built from the shipped source pin; (path, version output, build record)."""
    s = testimages.sources()
    return s.envd, s.envd_version_output, s.envd_build


@pytest.fixture(scope="session")
def artifact_server():
    """The session's HTTP server on 127.0.0.1, serving the real envd at /envd."""
    return testimages.sources().served.base


@pytest.fixture(scope="session")
def built():
    """The session's one real build of e2b-rt (mkosi, packing) with the shipped
    recipes, shared with tests/boot and tests/sdk through tests/testimages.py."""
    b = testimages.image(FLAVOR)
    if not b.ok or b.cp.returncode != 0:
        pytest.fail(b.failure())
    return b


@pytest.fixture(scope="module")
def tree(built):
    assert built.tree.is_dir()
    return built.tree


def unit(tree, name) -> configparser.ConfigParser:
    """A unit file from the image, parsed (repeated keys joined by spaces)."""
    path = tree / "usr/lib/systemd/system" / name
    assert path.is_file(), f"{name} not installed in /usr/lib/systemd/system"
    cp = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",),
                                   comment_prefixes=("#", ";"))
    cp.optionxform = str
    merged = {}
    section = None
    for line in path.read_text().splitlines():
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            section = s[1:-1]
            merged.setdefault(section, {})
            continue
        k, _, v = s.partition("=")
        d = merged[section]
        d[k.strip()] = (d.get(k.strip(), "") + " " + v.strip()).strip()
    cp.read_dict(merged)
    return cp


def words(cp, section, key):
    return cp.get(section, key, fallback="").split()
