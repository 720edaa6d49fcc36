"""Where a test run's time goes (issue 51): every test's setup, call and
teardown, timed by pytest, and the twenty slowest written to
out/test-durations.txt when the run ends, with the whole run's time, the
load average before and after, and the machine's cores, so that the next
person sees what to share or move before adding more. A setup that builds
or boots an image shared by a module or the session shows as that test's
setup: the first test to need it pays for it.

Written by tests/conftest.py's hooks; pytest's own --durations prints the
same figures on the terminal."""
import os
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEEP = 20


class Durations:
    def __init__(self, path: pathlib.Path = ROOT / "out" / "test-durations.txt"):
        self.path = path
        self.rows = []
        self.started = time.monotonic()
        self.load_before = os.getloadavg()

    def add(self, report):
        if report.when in ("setup", "call", "teardown"):
            self.rows.append((report.duration, report.when, report.nodeid, report.outcome))

    def write(self, exitstatus) -> pathlib.Path:
        total = time.monotonic() - self.started
        rows = sorted(self.rows, reverse=True)[:KEEP]
        load = " ".join(f"{x:.2f}" for x in self.load_before) + " -> " + " ".join(f"{x:.2f}" for x in os.getloadavg())
        lines = [f"# the {len(rows)} slowest of {len(self.rows)} setups, calls and teardowns",
                 f"# run: {total:.0f} s, exit status {int(exitstatus)}, {os.cpu_count()} cores, load {load}",
                 "# seconds  phase     outcome  test"]
        lines += [f"{d:9.1f}  {when:<8}  {outcome:<7}  {nodeid}" for d, when, nodeid, outcome in rows]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(self.path)
        return self.path
