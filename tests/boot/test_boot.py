"""Boot what we build: one QEMU boot per variant (vm.VARIANTS), every check
of that variant against that boot.

The boots (tests/boot/vm.py): e2b-rt on 512 MiB, stopping envd-guard after its
checks; e2b-ci on 1 GiB; e2b-ci with a failing envd-guard (fail closed). e2b-ci
on 512 MiB (vm.WORKFLOW_VARIANTS) is the image workflow's. Each boot happens once, on its first test; each check of
tests/boot/checks.py is its own test, so a report names exactly what failed.
Timings go to the test output (-rA/-s) and to out/boot-test/<boot>-report.json.
"""
import os
import pathlib
import sys

import pytest

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
import vm  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import testimages  # noqa: E402

ROOT = vm.ROOT
OUT = pathlib.Path(os.environ.get("E2B_OUT", ROOT / "out"))


def image_for(flavor: str) -> pathlib.Path:
    """The session's build of FLAVOR with the stand-in recipes, shared with
    tests/image and tests/image_ci (tests/testimages.py). `make boot-test`
    boots out/<flavor>/ as built instead."""
    built = testimages.image(flavor)
    if not built.ok:
        pytest.fail(built.failure())
    return built.dir / "rootfs.ext4"


_BOOTS: dict = {}  # boot id -> result or the failure: one boot per variant per session


@pytest.fixture(scope="module")
def booted(request):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace, tap device)")
    v = request.param
    if v.id not in _BOOTS:
        try:
            rootfs = image_for(v.flavor)
            res = vm.boot(v, rootfs, keep_logs=OUT / "boot-test")
            print("\n" + checks.timing_line(res))
            _BOOTS[v.id] = res
        except BaseException as e:  # skip/fail outcomes included: remembered, not retried
            _BOOTS[v.id] = e
    if isinstance(_BOOTS[v.id], BaseException):
        raise _BOOTS[v.id]
    return _BOOTS[v.id]


def _check_ids():
    for v in vm.VARIANTS:
        for name in checks.checks_for(v):
            yield pytest.param(v, name, id=f"{v.id}-{name}")


@pytest.mark.parametrize("booted,check", list(_check_ids()), indirect=["booted"])
def test_boot(booted, check):
    ok, detail = checks.checks_for(checks.variant_of(booted))[check](booted)
    if not ok:
        tail = booted.get("console", "")[-2500:]
        pytest.fail(f"{check}: {detail}\n--- console tail ---\n{tail}", pytrace=False)
    print(f"{check}: {detail}")
