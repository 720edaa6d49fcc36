"""Boot what we build: one QEMU boot per flavor, every check against that boot.

The boot (tests/boot/vm.py) happens once per flavor in a module-scoped
fixture; each check of tests/boot/checks.py is its own test, so a report names
exactly what failed. Timings go to the test output (-rA/-s) and to
out/boot-test/<flavor>-report.json.
"""
import os
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
import vm  # noqa: E402

sys.path.insert(0, str(HERE.parent))
import testimages  # noqa: E402

ROOT = vm.ROOT
OUT = pathlib.Path(os.environ.get("E2B_OUT", ROOT / "out"))
FLAVORS = ["e2b-rt", "e2b-ci"]
TIMEOUT = {"e2b-rt": 300.0, "e2b-ci": 600.0}


def image_for(flavor: str) -> pathlib.Path:
    """The session's build of FLAVOR with the stand-in recipes, shared with
    tests/image and tests/image_ci (tests/testimages.py). `make boot-test`
    boots out/<flavor>/ as built instead."""
    if not (ROOT / "os-image" / flavor).is_dir():
        pytest.skip(f"{flavor}: no os-image/{flavor} in this tree yet (the flavor's own issue)")
    built = testimages.image(flavor)
    if not built.ok:
        pytest.fail(built.failure())
    return built.dir / "rootfs.ext4"


_BOOTS: dict = {}  # flavor -> result or the failure: one boot per flavor per session


@pytest.fixture(scope="module")
def booted(request):
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespace, tap device)")
    flavor = request.param
    if flavor not in _BOOTS:
        try:
            rootfs = image_for(flavor)
            res = vm.boot(flavor, rootfs, timeout=TIMEOUT[flavor], keep_logs=OUT / "boot-test")
            print("\n" + checks.timing_line(res))
            _BOOTS[flavor] = res
        except BaseException as e:  # skip/fail outcomes included: remembered, not retried
            _BOOTS[flavor] = e
    if isinstance(_BOOTS[flavor], BaseException):
        raise _BOOTS[flavor]
    return _BOOTS[flavor]


def _check_ids():
    for flavor in FLAVORS:
        for name in checks.checks_for(flavor):
            yield pytest.param(flavor, name, id=f"{flavor}-{name}")


@pytest.mark.parametrize("booted,check", list(_check_ids()), indirect=["booted"])
def test_boot(booted, check):
    flavor = booted["flavor"]
    ok, detail = checks.checks_for(flavor)[check](booted)
    if not ok:
        tail = booted.get("console", "")[-2500:]
        pytest.fail(f"{check}: {detail}\n--- console tail ---\n{tail}", pytrace=False)
    print(f"{check}: {detail}")
