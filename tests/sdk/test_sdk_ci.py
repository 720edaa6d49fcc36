"""E2B's real code-interpreter SDKs, unmodified and in debug mode, against
the e2b-ci tree's Jupyter and code-interpreter API server with the real envd
beside them (not stack.sh's /envs stand-in), through e2b-hostlink forward
49983 49999: `@e2b/code-interpreter` from npm (probe_ci.mjs) and
`e2b-code-interpreter` from PyPI (probe_ci.py), both in one stack boot
(Jupyter's start is the slow part). Each case is its own test
(test_ci_case[js-ci_chart]) with the same expected values for both SDKs.

Tree: $E2B_SDK_CI_TREE, or the session's e2b-ci build (testimages)."""
import pathlib

import pytest

from harness import require_root
from expectations import CI_EXPECTED as EXPECTED
from sdk_helpers import StackRun, npm_sdk, py_sdk, tree

HERE = pathlib.Path(__file__).resolve().parent

@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    require_root()
    ci_tree = tree("e2b-ci")
    npm = npm_sdk()
    python = py_sdk()
    # Both probes in the one stack, their CASE lines prefixed by the SDK.
    both = ('cd "$1" && node probe_ci.mjs | sed "s/^CASE /CASE js-/"; '
            '"$2" "$3" | sed "s/^CASE /CASE py-/"')
    return StackRun("e2b-ci", ci_tree, tmp_path_factory.mktemp("sdk-ci"),
                    ["/bin/bash", "-c", both, "probes", npm, python, HERE / "probe_ci.py"])


@pytest.mark.parametrize("name", list(EXPECTED))
@pytest.mark.parametrize("sdk", ["js", "py"])
def test_ci_case(ci_run, sdk, name):
    assert ci_run.case(f"{sdk}-{name}") == EXPECTED[name]


def test_ci_probes_reported_every_case(ci_run):
    assert sorted(ci_run.cases) == sorted(f"{sdk}-{name}" for sdk in ("js", "py") for name in EXPECTED), \
        ci_run.output[-3000:]
    assert ci_run.returncode == 0, ci_run.output[-3000:]
