"""Booting a built template (test only): once, in QEMU like the flavors
(tests/boot/vm.py), with the pool's warmup for it (ci/templates.py, from the
image's labels) run in the clone by guest/template.sh. Shared by the E2B
example's boot (test_template_boot.py, in make test) and the web example's,
the data example's and builder mode's (template_web_boot.py,
template_data_boot.py, tests/builder/builder_boot.py: the image workflow's)."""
from __future__ import annotations

import os
import pathlib
import sys
from typing import Callable

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "ci"))

import checks  # noqa: E402
import vm  # noqa: E402
from template_warmup import template_spec  # noqa: E402
from templates import FLAVORS  # noqa: E402

OUT = pathlib.Path(os.environ.get("E2B_OUT", vm.ROOT / "out"))


def boot_template(built, name: str, variant: Callable[[str], vm.Variant],
                  require_done: bool = True) -> dict:
    """Boot BUILT (a testimages build of template NAME) as VARIANT(warmup),
    where warmup is the pool template's shell command. With require_done,
    a probe that did not finish fails the fixture (console tail included);
    without it, each boot check judges the report on its own."""
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace, tap device)")
    if not built.ok:
        pytest.fail(built.failure())
    warmup = template_spec(built.out, name, FLAVORS)["warmup"]
    assert warmup[:2] == ["sh", "-c"], warmup
    res = vm.boot(variant(warmup[2]), built.dir / "rootfs.ext4", keep_logs=OUT / "boot-test")
    print("\n" + checks.timing_line(res))
    if require_done and res.get("report", {}).get("done") != "1":
        pytest.fail(f"boot of template {name}: {res.get('error')}\n{res.get('console', '')[-2500:]}")
    return res


def judge(booted: dict, v: vm.Variant, check: str, res: dict | None = None) -> None:
    """One of checks.py's boot checks for V on BOOTED (or RES, a view of it):
    fails with the console's tail, else prints its detail."""
    ok, detail = checks.checks_for(v)[check](booted if res is None else res)
    if not ok:
        pytest.fail(f"{check}: {detail}\n--- console tail ---\n{booted.get('console', '')[-2500:]}", pytrace=False)
    print(f"{check}: {detail}")


def assert_warmup_passed(booted: dict) -> None:
    rep = booted["report"]
    assert rep.get("template_warmup_rc") == "0", rep.get("template_warmup_err")


def with_report(res: dict, **changes) -> dict:
    """RES with its report's CHANGES: a view for one check (the boot's own
    result is left as it is)."""
    return {**res, "report": {**res["report"], **changes}}
