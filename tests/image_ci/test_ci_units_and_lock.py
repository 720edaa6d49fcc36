"""Static checks of the e2b-ci units, preset and lists, and of the
code-interpreter pin in recipes/: its form, a build without a source failing
fast, the pin recomputed from the public repository (E2B_CODE_INTERPRETER_REPO),
and the patches against the real tree (the built image is checked in
test_ci_image.py)."""
import configparser
import os
import re
import shutil
import subprocess

import pytest

import testimages
from ci_helpers import FLAVOR_DIR, ROOT, run

UNITS = ROOT / "units"


def unit(name):
    # systemd units allow repeated keys; keep the last value, like systemd for scalars.
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    p.read(UNITS / name)
    return p


def words(value):
    return value.split()


def test_jupyter_unit():
    u = unit("jupyter.service")
    assert "envd-guard.service" in words(u["Unit"]["Requires"])
    assert "envd-guard.service" in words(u["Unit"]["After"])
    # Loopback only, and on the boot's critical path: not held back until
    # networkd has started (network.target).
    assert "network.target" not in words(u["Unit"]["After"])
    s = u["Service"]
    assert s["User"] == "user"
    assert "-m jupyter_server " in s["ExecStart"]
    assert "--ServerApp.ip" not in s["ExecStart"], "the bind address lives in the config file only"
    assert s["OOMPolicy"] == "continue"
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_code_interpreter_unit_is_ordered_after_jupyter_and_the_guard():
    u = unit("code-interpreter.service")
    for key in ("Requires", "After"):
        assert {"envd-guard.service", "jupyter.service"} <= set(words(u["Unit"][key]))
    assert u["Unit"]["PartOf"] == "jupyter.service"
    s = u["Service"]
    assert s["User"] == "user"
    assert re.search(r"uvicorn main:app --host 127\.0\.0\.1 --port 49999 ", s["ExecStart"])
    assert s["WorkingDirectory"] == "/usr/lib/e2b-code-interpreter/server"
    assert s["NoNewPrivileges"] == "yes" and s["ProtectSystem"] == "strict"
    assert s["IPAddressDeny"] == "any" and s["IPAddressAllow"] == "localhost"
    # It starts together with Jupyter and waits for Jupyter's /api/status
    # itself (PATCHES 0006; tests/image_ci/test_ci_server.py), for the
    # server's own default (180 s) unless a drop-in sets one.
    assert "ExecStartPre" not in s
    assert "E2B_CI_JUPYTER_START_TIMEOUT" not in s["Environment"]


def test_units_are_enabled_by_the_flavor():
    """The flavor's preset is its one list of units (os-image/build.sh ships
    the units/ files it enables)."""
    preset = (ROOT / "os-image/mkosi.profiles/e2b-ci/mkosi.extra/usr/lib/systemd/system-preset/20-e2b-ci.preset")
    enabled = [l.split()[1] for l in preset.read_text().splitlines() if l.startswith("enable ")]
    assert enabled == ["jupyter.service", "code-interpreter.service"]


LOCK = ROOT / "recipes/code-interpreter.lock"
GIT_TREE = "ceadbca48a3a9ad9c628121ffda6775206b0146d"


def test_code_interpreter_lock_pins_a_commit_by_its_tree(release_tools):
    st = release_tools.lock_stanza(LOCK, "code-interpreter")
    commit = st["version"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert st["url"] == f"https://codeload.github.com/e2b-dev/code-interpreter/tar.gz/{commit}"
    assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", st["tree_sha256"])
    text = LOCK.read_text()
    # The lock says where the pin comes from and how to reproduce it.
    assert f"git tree\n# {GIT_TREE}" in text or GIT_TREE in text
    assert f"{commit} > ci.tar.gz" in text and "build/pinfetch --hash-tree ci.tar.gz" in text
    assert "NOT PINNED" not in text
    listed = (FLAVOR_DIR / "pins").read_text()
    assert re.search(r"^code-interpreter\.lock code-interpreter /usr/lib/e2b-code-interpreter/source 0755$",
                     listed, re.M)


def test_without_a_source_the_build_stops_at_once_naming_the_artifact_and_url(tmp_path):
    """The shipped code-interpreter lock, no mirror, no network: make stops
    before mkosi in about a second, naming code-interpreter and its URL. (The
    shipped recipes: the code-interpreter is pinned before envd is built.)"""
    subprocess.run(["make", "-s", "-C", str(ROOT), "tools"], check=True, capture_output=True)
    cp = testimages.make("e2b-ci", tmp_path / "out", recipes=testimages.SHIPPED_RECIPES, cache=tmp_path / "cache")
    url = testimages.lock_stanza(LOCK, "code-interpreter")["url"]
    assert cp.returncode != 0
    assert "code-interpreter" in cp.stderr and url in cp.stderr and "before mkosi" in cp.stderr, cp.stderr
    assert "mkosi:" not in cp.stderr
    print(f"failed in {cp.seconds:.2f}s: {cp.stderr.strip().splitlines()[-3]}")


def git_archive(repo, commit, dest):
    with open(dest, "wb") as f:
        run(["git", "-C", repo, "archive", "--format=tar.gz", f"--prefix=code-interpreter-{commit}/", commit],
            stdout=f, capture_output=False, text=False).check_returncode()
    return dest


@pytest.mark.skipif(not os.environ.get("E2B_CODE_INTERPRETER_REPO"),
                    reason="set E2B_CODE_INTERPRETER_REPO to a git copy of the public e2b-dev/code-interpreter "
                           "repository to check the shipped pin against it (CI has no copy)")
def test_shipped_lock_verifies_against_a_git_archive_of_the_commit(release_tools, tmp_path):
    """The pin, recomputed from the public repository: the commit's git tree
    is the one the lock names, and pinfetch fetches `git archive` of the
    commit (from a tree mirror) only because its tree matches the lock."""
    repo = os.environ["E2B_CODE_INTERPRETER_REPO"]
    st = release_tools.lock_stanza(LOCK, "code-interpreter")
    commit = st["version"]
    tree = run(["git", "-C", repo, "rev-parse", f"{commit}^{{tree}}"])
    assert tree.returncode == 0, tree.stderr
    assert tree.stdout.strip() == GIT_TREE
    mirror = tmp_path / "mirror"
    (mirror / "tree").mkdir(parents=True)
    git_archive(repo, commit, mirror / "tree" / testimages.tree_pin_hex(st["tree_sha256"]))
    cp = release_tools.run("pinfetch", "--lock", LOCK, "--name", "code-interpreter", "--output", tmp_path / "src",
                           "--no-cache", "--offline", "--mirror", f"file://{mirror}", "--verbose")
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "src" / "template" / "server" / "main.py").is_file()
    if shutil.which("nix"):
        nix = run(["nix", "--extra-experimental-features", "nix-command", "hash", "path", "--type", "sha256",
                   tmp_path / "src"])
        assert nix.stdout.strip() == st["tree_sha256"], nix.stdout
    print(f"{repo} @ {commit}: git tree {GIT_TREE}, tree_sha256 {st['tree_sha256']} verified by pinfetch"
          + (" and nix hash path" if shutil.which("nix") else ""))


def test_patches_apply_to_the_real_tree(release_tools, tmp_path):
    """`make ci-patch-check` on the shipped lock, the archive served as a tree mirror."""
    if testimages.upstream_archive() is None:
        pytest.skip(f"no git archive of the pinned commit in {testimages.UPSTREAM_DIR} (set E2B_UPSTREAM_DIR)")
    st = release_tools.lock_stanza(LOCK, "code-interpreter")
    mirror = tmp_path / "mirror"
    (mirror / "tree").mkdir(parents=True)
    shutil.copyfile(testimages.upstream_archive(), mirror / "tree" / testimages.tree_pin_hex(st["tree_sha256"]))
    cp = run(["make", "-s", "-C", ROOT, "ci-patch-check", f"pin_mirror=file://{mirror}", "offline=1",
              f"cache={tmp_path / 'cache'}"])
    assert cp.returncode == 0, cp.stdout + cp.stderr
    patches = [line.strip() for line in (ROOT / "os-image/e2b-ci/PATCHES").read_text().splitlines()
               if line.strip().endswith(".patch") and not line.startswith("#")]
    applied = [f"e2b-ci: applied {p}" for p in patches]
    assert patches and all(a in cp.stdout + cp.stderr for a in applied), cp.stdout + cp.stderr
