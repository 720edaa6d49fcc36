"""E2B's real code-interpreter SDKs, unmodified and in debug mode, against
the e2b-ci tree's Jupyter and code-interpreter API server with the real envd
beside them (not stack.sh's /envs stand-in), through e2b-hostlink forward
49983 49999: `@e2b/code-interpreter` from npm (probe_ci.mjs) and
`e2b-code-interpreter` from PyPI (probe_ci.py), both in one stack boot
(Jupyter's start is the slow part). Each case is its own test
(test_ci_case[js-ci_chart]) with the same expected values for both SDKs.

The per-language cases (ci_languages.json, CI_LANGUAGE_EXPECTED) run for
the languages the tree's kernelspecs serve; a language whose kernel the image
was built without (kernels=) is skipped, naming it. The default build has all
five kernels, so nothing is skipped there.

The install cases (CI_INSTALL_EXPECTED) run here only: pip as the user, with
sudo, `!pip` and `%pip` in a cell, each imported by the next cell, and npm
in /home/user then require() in the javascript kernel, from the stack's
package index (tests/sdk/package_index.py), which a boot's guest cannot reach.

Tree: $E2B_SDK_CI_TREE, or the session's e2b-ci build (testimages)."""
import json
import pathlib

import pytest

from harness import require_root
from expectations import CI_EXPECTED, CI_INSTALL_EXPECTED, CI_LANGUAGE_EXPECTED
from sdk_helpers import StackRun, npm_sdk, py_sdk, tree
from testimages import CI_LANGUAGE_KERNEL as LANGUAGE_KERNEL, ci_kernels, ci_languages

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
EXPECTED = {**CI_EXPECTED, **CI_INSTALL_EXPECTED, **CI_LANGUAGE_EXPECTED}
CASE_LANGUAGE = {c["name"]: c["language"]
                 for c in json.loads((HERE / "ci_languages.json").read_text())["cases"]}


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory):
    require_root()
    ci_tree = tree("e2b-ci")
    npm = npm_sdk()
    python = py_sdk()
    kernels = ci_kernels(ci_tree)
    languages = ",".join(ci_languages(kernels))
    # Both probes in the one stack, their CASE lines prefixed by the SDK.
    both = ('cd "$1" && node probe_ci.mjs "$4" | sed "s/^CASE /CASE js-/"; '
            '"$2" "$3" "$4" | sed "s/^CASE /CASE py-/"')
    run = StackRun("e2b-ci", ci_tree, tmp_path_factory.mktemp("sdk-ci"),
                   ["/bin/bash", "-c", both, "probes", npm, python, HERE / "probe_ci.py", languages], index=True)
    run.kernels = kernels
    return run


def expected_cases(run) -> list:
    """The case names RUN's image serves (its kernels)."""
    return [n for n in EXPECTED if n not in CASE_LANGUAGE or LANGUAGE_KERNEL[CASE_LANGUAGE[n]] in run.kernels]


@pytest.mark.parametrize("name", list(EXPECTED))
@pytest.mark.parametrize("sdk", ["js", "py"])
def test_ci_case(ci_run, sdk, name):
    if name not in expected_cases(ci_run):
        pytest.skip(f"the image was built without the {LANGUAGE_KERNEL[CASE_LANGUAGE[name]]} kernel "
                    f"(its kernels: {', '.join(ci_run.kernels)})")
    want = EXPECTED[name]
    if callable(want):
        want(ci_run.case(f"{sdk}-{name}"))
    else:
        assert ci_run.case(f"{sdk}-{name}") == want


def test_ci_probes_reported_every_case(ci_run):
    assert sorted(ci_run.cases) == sorted(f"{sdk}-{name}" for sdk in ("js", "py") for name in expected_cases(ci_run)), \
        ci_run.output[-3000:]
    assert ci_run.returncode == 0, ci_run.output[-3000:]
