"""pytest's hook file for tests/: registers the shared fixtures. The code lives
in tests/harness.py, which test modules import (a module named `conftest` is
ambiguous once another folder has one)."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# The checkout's top, once, for its packages (sandbox, template): tests import
# them as the build runs them, and a subprocess running one gets PYTHONPATH.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from harness import release_tools, tools  # noqa: E402,F401  (fixtures)
from durations import Durations  # noqa: E402

_durations = Durations()


def pytest_configure(config):
    config.addinivalue_line("markers", "build: needs an image build or a boot; make test runs it, make check does not")


def pytest_runtest_logreport(report):
    _durations.add(report)


def pytest_sessionfinish(session, exitstatus):
    """out/test-durations.txt: the twenty slowest setups and tests (tests/durations.py)."""
    _durations.write(exitstatus)


def pytest_terminal_summary(terminalreporter):
    """Say which code-interpreter the e2b-ci builds used (tests/testimages.py),
    and where the durations went."""
    terminalreporter.write_line(f"slowest setups and tests: {_durations.path}")
    import testimages
    source = testimages.code_interpreter_source()
    if source:
        terminalreporter.write_line(f"e2b-ci code-interpreter: {source}")
