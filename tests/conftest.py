"""pytest's hook file for tests/: registers the shared fixtures. The code lives
in tests/harness.py, which test modules import (a module named `conftest` is
ambiguous once another folder has one)."""
import os
import pathlib
import shutil
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The checkout's top, once, for its packages (sandbox, template): tests import
# them as the build runs them, and a subprocess running one gets PYTHONPATH.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from harness import mount_points, release_tools, tools  # noqa: E402,F401  (fixtures)
from durations import Durations  # noqa: E402

import pytest  # noqa: E402

# Written by the controlling process only: with pytest-xdist (make test runs
# two workers) every worker's reports reach the controller's hooks too.
_durations = None


def pytest_configure(config):
    global _durations
    config.addinivalue_line("markers", "build: needs an image build or a boot; make test runs it, make check does not")
    config.addinivalue_line("markers", "builds_apart(name): builds and boots nothing the one group does and "
                            "shares nothing with it: make test runs these modules as group NAME, beside it")
    if not hasattr(config, "workerinput"):
        _durations = Durations()
        import testimages
        testimages.SOURCE_NOTE.unlink(missing_ok=True)


_GROUP = "builds-and-boots"


def pytest_itemcollected(item):
    """make test runs two pytest-xdist workers with --dist loadgroup. The
    tests that build or boot, and every module that make check does not
    run (E2B_CHECK_TESTS, from the Makefile), form one group run in order
    on one worker: they share the session's builds and boots, and only one
    QEMU runs at a time. Each module make check runs (namespace layers,
    units, parsers: no image, names of their own) is a group of its own for
    the other worker. Without E2B_CHECK_TESTS every test is in the one
    group. (Marked here, as each item is collected: xdist reads the marks
    in its own pytest_collection_modifyitems.)"""
    roots = [pathlib.Path(item.config.rootpath, p) for p in os.environ.get("E2B_CHECK_TESTS", "").split()]
    free = item.get_closest_marker("build") is None and any(r == item.path or r in item.path.parents for r in roots)
    apart = item.get_closest_marker("builds_apart")
    if apart and roots:
        # A build of its own (e2b-base: its own caches, tests/testimages.py's
        # base_cache), started on the other worker as the run begins.
        item.e2b_group = apart.args[0]
    else:
        item.e2b_group = item.nodeid.split("::")[0] if free else _GROUP
    item.add_marker(pytest.mark.xdist_group(item.e2b_group))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The one group's tests first, so that a worker starts with them; then
    the groups that build apart, for the other worker to start with."""
    apart = {i.e2b_group for i in items if i.get_closest_marker("builds_apart")} - {_GROUP}
    items.sort(key=lambda i: 0 if i.e2b_group == _GROUP else 1 if i.e2b_group in apart else 2)  # stable


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item.e2b_call_passed = outcome.get_result().passed


@pytest.fixture(autouse=True)
def _drop_tmp_path_when_passed(request):
    """A passing test's tmp_path goes when it ends: a template or image
    build there is a gigabyte or more, and pytest keeps every test's until
    the session ends, so a whole run would fill the disk. A failing test's
    stays for a look."""
    tmp = str(request.getfixturevalue("tmp_path")) if "tmp_path" in request.fixturenames else None
    yield
    if tmp and getattr(request.node, "e2b_call_passed", False):
        # Never rmtree into a mount left behind.
        if not any(m == tmp or m.startswith(tmp + "/") for m in mount_points()):
            shutil.rmtree(tmp, ignore_errors=True)


def pytest_runtest_logreport(report):
    if _durations:
        _durations.add(report)


def pytest_sessionfinish(session, exitstatus):
    """out/test-durations.txt: the twenty slowest setups and tests (tests/durations.py)."""
    if _durations:
        _durations.write(exitstatus)


def pytest_terminal_summary(terminalreporter):
    """Say which code-interpreter the e2b-ci builds used (tests/testimages.py),
    and where the durations went."""
    if _durations:
        terminalreporter.write_line(f"slowest setups and tests: {_durations.path}")
    import testimages
    source = testimages.code_interpreter_source()
    if source:
        terminalreporter.write_line(f"e2b-ci code-interpreter: {source}")
