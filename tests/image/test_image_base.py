"""The built e2b-base image (E2B's default `base` sandbox): its tree, labels
and manifest. One real mkosi build (testimages.image("e2b-base"), with
caches of its own so that make test builds it on the second worker beside
the first worker's builds); the SDK's view of the same tree, installs
included, is tests/sdk/test_sdk_base.py."""
import json
import os
import pathlib
import re
import stat

import pytest

import testimages

# Builds or boots an image: make test runs it, make check does not; a build of its own.
pytestmark = [pytest.mark.build, pytest.mark.builds_apart("e2b-base")]

ROOT = testimages.ROOT
USER_UID = USER_GID = 1000
# E2B's base tools (os-image/README.md, "e2b-base"), as the user finds them on PATH.
TOOLS = ("python3", "pip", "pip3", "node", "npm", "yarn", "yarnpkg", "gcc", "g++", "cc", "make", "git",
         "gh", "curl", "sudo", "lsblk")
PATH = ("usr/local/bin", "usr/bin", "bin")
# What starts as root and must stay out of the user's reach (sandbox/guard_record.py's list).
ROOT_STARTED = ("usr/bin/envd", "usr/bin/envd-guard", "usr/bin/mmds-serve", "usr/bin/vsock-relay",
                "usr/bin/e2b-clone", "etc/envd-version", "etc/e2b", "usr/lib/systemd/system",
                "etc/systemd/system")


@pytest.fixture(scope="module")
def built():
    b = testimages.image("e2b-base")
    if not b.ok:
        pytest.fail(b.failure())
    return b


def resolve(tree: pathlib.Path, rel: str) -> pathlib.Path | None:
    """REL inside TREE with the tree's symlinks followed inside it, or None."""
    p = pathlib.PurePosixPath("/" + rel)
    for _ in range(40):
        host = tree / str(p).lstrip("/")
        if host.is_symlink():
            target = pathlib.PurePosixPath(os.readlink(host))
            p = target if target.is_absolute() else pathlib.PurePosixPath(os.path.normpath(p.parent / target))
            continue
        return host if host.exists() else None
    return None


def user_can_write(st: os.stat_result) -> bool:
    """Whether uid 1000 (gid 1000, no other group) may write what ST
    describes (a symlink's own mode means nothing; its owner does)."""
    if st.st_uid == USER_UID:
        return True
    if stat.S_ISLNK(st.st_mode):
        return False
    if st.st_gid == USER_GID and st.st_mode & stat.S_IWGRP:
        return True
    return bool(st.st_mode & stat.S_IWOTH)


def test_every_tool_of_e2b_base_is_on_path(built):
    missing = [t for t in TOOLS if not any(resolve(built.tree, f"{d}/{t}") for d in PATH)]
    assert not missing, f"not on the user's PATH in the image: {missing}"


def test_node_is_20_or_newer_and_python_3(built):
    packages = {p["name"]: p["version"] for p in built.manifest["packages"]}
    assert int(re.match(r"(\d+)", packages["nodejs"]).group(1)) >= 20, packages["nodejs"]
    assert packages["python3"].startswith("3."), packages["python3"]
    for name in ("python3-pip", "python3-venv", "python3-dev", "npm", "build-essential", "gh", "git", "curl",
                 "sudo", "util-linux"):
        assert name in packages, f"{name} is not installed"
    # Debian's yarnpkg brings TypeScript and esbuild; yarn is npm's own (os-image/e2b-base/prepare.sh).
    assert "yarnpkg" not in packages and "node-typescript" not in packages


def test_yarn_is_the_pinned_one(built):
    lock = json.loads((ROOT / "recipes/yarn/package-lock.json").read_text())["packages"]["node_modules/yarn"]
    artifact = next(a for a in built.manifest["artifacts"] if a["name"] == "yarn")
    assert (artifact["version"], artifact["integrity"]) == (lock["version"], lock["integrity"])
    shipped = json.loads((built.tree / "usr/local/lib/node_modules/yarn/package.json").read_text())
    assert shipped["version"] == lock["version"]
    assert os.readlink(built.tree / "usr/local/bin/yarn") == "../lib/node_modules/yarn/bin/yarn.js"


def test_pip_is_not_refused_by_pep_668(built):
    markers = sorted(str(p.relative_to(built.tree)) for p in built.tree.glob("usr/lib/python3*/EXTERNALLY-MANAGED"))
    assert not markers, f"PEP 668's marker is still there: {markers}"
    exclude = (built.tree / "etc/dpkg/dpkg.cfg.d/03-e2b-pip").read_text()
    assert re.search(r"^path-exclude /usr/lib/python3\.\d+/EXTERNALLY-MANAGED$", exclude, re.M), exclude


def test_the_users_install_places_are_the_users(built):
    home = built.tree / "home/user"
    sites = list(home.glob(".local/lib/python3.*/site-packages"))
    assert len(sites) == 1, sites
    for p in (home / ".local", home / ".local/bin", sites[0], home / ".npmrc"):
        st = p.lstat()
        assert (st.st_uid, st.st_gid) == (USER_UID, USER_GID), f"{p}: owned by {st.st_uid}:{st.st_gid}"
    assert "prefix=/home/user/.local" in (home / ".npmrc").read_text().splitlines()


def test_nothing_started_as_root_is_writable_by_the_user(built):
    """The guard, envd, the relays, mmds-serve, e2b-clone and their units,
    every directory on their way, and /usr/local (sudo's installs land there,
    and root's PATH starts with it): none writable by the user without sudo."""
    offenders = []
    for rel in ROOT_STARTED:
        p = built.tree / rel
        assert p.exists() or p.is_symlink(), rel
        parts = pathlib.PurePosixPath(rel).parts
        for i in range(len(parts) + 1):
            q = built.tree.joinpath(*parts[:i])
            if user_can_write(q.lstat()):
                offenders.append(str(q.relative_to(built.tree)))
    for dirpath, dirnames, filenames in os.walk(built.tree / "usr/local"):
        for name in [*dirnames, *filenames, ""]:
            q = pathlib.Path(dirpath, name)
            if user_can_write(q.lstat()):
                offenders.append(str(q.relative_to(built.tree)))
    assert not offenders, f"writable by uid {USER_UID}: {sorted(set(offenders))}"


def test_labels_read_back_with_skopeo(built):
    labels = testimages.check_labels(built, "e2b-base", "e2b-base", "10000,10052,10053,49983")
    assert labels["org.e2b-images.ready"] == "url http://127.0.0.1:49983/health"
    assert labels["org.e2b-images.memory-mb"] == "512"
