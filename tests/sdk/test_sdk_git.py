"""The SDKs' git module (`sbx.git.*`) against the real envd and the git the
e2b-rt image ships: the JS `e2b` SDK from npm (probe_git.mjs) and the Python
`e2b` SDK from PyPI (probe_git.py), unmodified and in debug mode, each in its
own namespace stack (sdk_stack.sh, as test_sdk_rt.py). Both run init (also a
bare repository), configureUser, add, commit, status, branches,
createBranch, remoteAdd, push over file://, clone of a branch and pull, as
`user` and as root; then three failures that must reach the SDK as its own
error types with git's message. Each case is its own test
(test_git_case[js-git_push_root]); the expected values, the same for both
SDKs but for the error class names, are expectations.py's GIT_CHECKS.

Tree: $E2B_SDK_RT_TREE, or the session's e2b-rt build (testimages)."""
import pytest

from expectations import GIT_CHECKS
from sdk_helpers import rt_probe_fixture, rt_tree  # noqa: F401  (rt_tree is a fixture, used by name)

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build


# The stack run of probe_git for the test's SDK.
git_run = rt_probe_fixture("probe_git")


def test_tree_ships_git(rt_tree):
    """git is the image's own, at Debian's version (what the cases run)."""
    status = (rt_tree / "var/lib/dpkg/status").read_text()
    assert "\nPackage: git\nStatus: install ok installed\n" in status
    assert (rt_tree / "usr/bin/git").is_file()


@pytest.mark.parametrize("name", list(GIT_CHECKS))
@pytest.mark.parametrize("git_run", ["js", "py"], indirect=True)
def test_git_case(git_run, name, rt_tree):
    sdk, stack = git_run
    GIT_CHECKS[name](stack.case(name), sdk, (rt_tree / "etc" / "envd-version").read_text().strip())


@pytest.mark.parametrize("git_run", ["js", "py"], indirect=True)
def test_git_probe_reported_every_case_and_nothing_else(git_run):
    sdk, stack = git_run
    assert list(stack.cases) == list(GIT_CHECKS), stack.output[-3000:]
    assert stack.returncode == 0, stack.output[-3000:]
