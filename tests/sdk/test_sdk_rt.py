"""E2B's real SDKs, unmodified and in debug mode, against the real envd from
the e2b-rt tree, end to end through our host channel: the JS `e2b` SDK from
npm and the Python `e2b` SDK from PyPI each run every case once
(probe_e2b.mjs, probe_e2b.py) in a namespace stack (sdk_stack.sh: guard,
mmds-serve, envd in Firecracker mode, the dynamic relay, the hybrid-vsock
stand-in, e2b-hostlink forward). One stack per SDK per session; each case
is its own test (test_case[js-commands_run]) with the same expected values
for both SDKs.

Tree: $E2B_SDK_RT_TREE, or the session's e2b-rt build (testimages)."""
import json
import subprocess

import pytest

from expectations import CHECKS
from sdk_helpers import (  # noqa: F401  (rt_tree is a fixture, used by name)
    NPM_SRC, npm_sdk, npm_version, pinned_py, py_sdk, rt_probe_fixture, rt_tree,
)

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build


# The stack run of probe_e2b for the test's SDK.
run = rt_probe_fixture("probe_e2b")


@pytest.mark.parametrize("name", list(CHECKS))
@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_case(run, name, rt_tree):
    sdk, stack = run
    CHECKS[name](stack.case(name), sdk, (rt_tree / "etc" / "envd-version").read_text().strip())


@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_envd_read_mmds_in_firecracker_mode(run):
    """envd ran without -isnotfc and took its ids from mmds-serve's document."""
    sdk, stack = run
    assert stack.stack.get("STACK-SANDBOX-ID") == stack.instance_id, stack.output[-3000:]
    assert stack.stack.get("STACK-TEMPLATE-ID") == stack.env_id, stack.output[-3000:]


@pytest.mark.parametrize("run", ["js", "py"], indirect=True)
def test_probe_reported_every_case_and_nothing_else(run):
    sdk, stack = run
    assert sorted(stack.cases) == sorted(CHECKS), stack.output[-3000:]
    assert stack.returncode == 0, stack.output[-3000:]


def test_installed_sdks_are_the_pinned_ones():
    """What the probes import is what tests/sdk pins: npm's lock and
    requirements.txt (a stale build/ copy would test another SDK)."""
    npm_sdk()
    wanted = json.loads((NPM_SRC / "package.json").read_text())["dependencies"]
    assert {name: npm_version(name) for name in wanted} == wanted
    python = py_sdk()
    got = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                          "print(m.version('e2b'), m.version('e2b-code-interpreter'))"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert got == [pinned_py("e2b"), pinned_py("e2b-code-interpreter")]
