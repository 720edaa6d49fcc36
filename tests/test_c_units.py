"""Runs every C unit test binary (plain TAP), in the release and the
ASan+UBSan builds, and fails on any `not ok`, a missing plan, a plan that does
not match the tests run, a non-zero exit, or a sanitizer report."""
import re
import subprocess

import pytest

from harness import BUILD, assert_no_sanitizer_report, declared

UNITS = [d / name for d in (BUILD / "unit", BUILD / "san" / "unit") for name in declared("UNITS")]


def parse_tap(out: str):
    plan, results = None, []
    for line in out.splitlines():
        if m := re.match(r"^1\.\.(\d+)", line):
            plan = int(m.group(1))
        elif m := re.match(r"^(not ok|ok)\b(.*)", line):
            results.append((m.group(1) == "ok", line))
    return plan, results


def test_unit_binaries_exist():
    missing = [str(p) for p in UNITS if not p.exists()]
    assert UNITS and not missing, f"unit test binaries missing: {missing}: run `make units`"


@pytest.mark.parametrize("binary", UNITS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_c_unit(binary):
    cp = subprocess.run([str(binary)], capture_output=True, text=True, timeout=300)
    assert_no_sanitizer_report(cp)
    plan, results = parse_tap(cp.stdout)
    failed = [line for ok, line in results if not ok]
    assert not failed, "\n".join(failed) + "\n" + cp.stderr
    assert plan is not None, f"{binary}: no TAP plan\n{cp.stdout}"
    assert plan == len(results) and plan > 0, f"{binary}: plan {plan}, ran {len(results)}"
    assert cp.returncode == 0, cp.stderr
