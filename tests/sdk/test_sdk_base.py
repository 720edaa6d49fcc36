"""E2B's real `e2b` SDK from PyPI, unmodified, against the e2b-base tree
(E2B's default `base` sandbox): its real envd in the namespace stack
(sdk_stack.sh; the tree is an overlay there, never changed), through
e2b-hostlink forward, after /init as the pool gives it. probe_base.py runs
what an E2B user runs first: every tool answers, and pip and npm install as
the default user and with sudo, from tests/sdk/package_index.py on the
guest's loopback. Each case is its own test.

Tree: $E2B_SDK_BASE_TREE, or the session's e2b-base build (testimages)."""
import json
import pathlib
import re

import pytest

from harness import require_root
from sdk_helpers import StackRun, py_sdk, tree

# Builds or boots an image: make test runs it, make check does not; a build of its own.
pytestmark = [pytest.mark.build, pytest.mark.builds_apart("e2b-base")]

HERE = pathlib.Path(__file__).resolve().parent
LOCK = HERE.parents[1] / "recipes/yarn/package-lock.json"


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    require_root()
    return StackRun("e2b-base", tree("e2b-base"), tmp_path_factory.mktemp("sdk-base"),
                    [py_sdk(), HERE / "probe_base.py"], index=True)


def installed(run, name: str, by: str, where: str) -> None:
    """NAME installed (exit 0), then used by the user from WHERE, fetched from the index."""
    obs = run.case(f"base_{by}")
    assert obs["install"] == 0, obs
    assert obs["use"]["exit"] == 0, obs
    assert where in obs["use"]["stdout"], obs
    assert re.search(rf"^GET /(simple|npm)/{name}/? 200$", run.index_log, re.M), run.index_log[-2000:]


def test_base_init(base_run):
    assert base_run.case("base_init") == {"initStatus": 204, "whoami": "user"}


def test_base_tools_answer(base_run):
    tools = base_run.case("base_tools")
    failed = {t: o for t, o in tools.items() if o["exit"] != 0}
    assert not failed, failed
    first = {t: o["first"][0] for t, o in tools.items()}
    assert int(re.fullmatch(r"v(\d+)\.\d+\.\d+", first["node"]).group(1)) >= 20, first["node"]
    assert first["python3"].startswith("Python 3."), first["python3"]
    assert "python 3." in first["pip"] and "python 3." in first["pip3"], first
    yarn = json.loads(LOCK.read_text())["packages"]["node_modules/yarn"]["version"]
    assert first["yarn"] == yarn, first["yarn"]
    assert first["gh"].startswith("gh version "), first["gh"]
    assert first["sudo"] == "sudo-ok" and first["venv"] == "/tmp/probe-venv", first


def test_pip_install_as_the_user(base_run):
    installed(base_run, "e2b-probe-pipuser", "pip_user", "/home/user/.local/lib/python3.")


def test_pip_install_with_sudo(base_run):
    installed(base_run, "e2b-probe-pipsudo", "pip_sudo", "/usr/local/lib/python3.")


def test_npm_install_in_a_project(base_run):
    installed(base_run, "e2b-probe-npmproj", "npm_project", "e2b-probe-npmproj")


def test_npm_install_global_as_the_user(base_run):
    installed(base_run, "e2b-probe-npmglobal", "npm_global_user", "/home/user/.local/bin/e2b-probe-npmglobal")


def test_npm_install_global_with_sudo(base_run):
    installed(base_run, "e2b-probe-npmsudo", "npm_global_sudo", "/usr/local/bin/e2b-probe-npmsudo")


def test_a_c_program_compiles_and_runs(base_run):
    assert base_run.case("base_compile") == {"exit": 0, "stdout": "compiled"}


def test_probe_reported_every_case(base_run):
    assert sorted(base_run.cases) == sorted(["base_init", "base_tools", "base_pip_user", "base_pip_sudo",
                                             "base_npm_project", "base_npm_global_user", "base_npm_global_sudo",
                                             "base_compile"]), base_run.output[-3000:]
    assert base_run.returncode == 0, base_run.output[-3000:]
