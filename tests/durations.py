"""Where a test run's time goes (issue 51): every test's setup, call and
teardown, timed by pytest, and the twenty slowest written to
out/test-durations.txt when the run ends, with the whole run's time, the
load average before and after, and the machine's cores, so that the next
person sees what to share or move before adding more. A setup that builds
or boots an image shared by a module or the session shows as that test's
setup: the first test to need it pays for it.

Every row is also appended to out/test-timeline.tsv as it happens, with
the wall clock, and each failure's last lines to out/test-failures.txt, so
that a run stopped from outside (CI's limit) still says where its time
went and what failed.

Written by tests/conftest.py's hooks; pytest's own --durations prints the
same figures on the terminal."""
import os
import pathlib
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
KEEP = 20


def free_gb(path) -> float:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize / 2**30


class Durations:
    def __init__(self, path: pathlib.Path = ROOT / "out" / "test-durations.txt"):
        self.path = path
        self.timeline = path.with_name("test-timeline.tsv")
        self.failures = path.with_name("test-failures.txt")
        self.rows = []
        self.started = time.monotonic()
        self.load_before = os.getloadavg()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.failures.unlink(missing_ok=True)
        with open(self.timeline, "w") as f:
            f.write("# elapsed_s\tseconds\tphase\toutcome\tload1\tdisk_free_gb\ttest\n")

    def add(self, report):
        if report.when in ("setup", "call", "teardown"):
            self.rows.append((report.duration, report.when, report.nodeid, report.outcome))
            elapsed = time.monotonic() - self.started
            if report.outcome == "failed":
                with open(self.failures, "a") as f:
                    tail = "\n".join(report.longreprtext.splitlines()[-40:])
                    f.write(f"=== {report.nodeid} ({report.when}, at {elapsed:.0f} s)\n{tail}\n")
            if report.duration >= 1.0 or report.outcome == "failed":
                with open(self.timeline, "a") as f:
                    f.write(f"{elapsed:.0f}\t{report.duration:.1f}\t{report.when}\t"
                            f"{report.outcome}\t{os.getloadavg()[0]:.2f}\t{free_gb(ROOT):.1f}\t{report.nodeid}\n")

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
