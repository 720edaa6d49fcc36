"""Not a test_*.py: run by name by the image workflow (ci/image.yml), as
tests/boot/template_data_boot.py is; `make test` builds this image
(test_builder_build.py) but a third template boot does not fit in its hour.

Boot builder mode's image (builder_image.py: examples/templates/web on the
debootstrap-made base of bases.py) once, in QEMU like the flavors
(tests/boot/vm.py), with the web template's probe (guest/template.sh). Every
check an e2b-rt boot gets (tests/boot/checks.py, COMMON: the guard, envd's
/health and /init through MMDS, no failed units, the host's drops, …) runs
against this boot, then the template's: the pool warmup passes and port
3000 is reached through the dynamic relay, its start command running as
`user`, whose uid here is not 1000 (the base's `node` has it)."""
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
BOOT = HERE.parent / "boot"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(BOOT))
sys.path.insert(0, str(HERE.parents[1] / "ci"))
import builder_image  # noqa: E402
import checks  # noqa: E402
import vm  # noqa: E402
from template_boots import assert_warmup_passed, boot_template, judge, with_report  # noqa: E402
TEMPLATE_UNIT = "e2b-template.service"


def variant(warmup: str = "") -> vm.Variant:
    # 1 vCPU / 512 MiB, e2b-rt's pool size, as the flavor's own boot.
    # 600 s, not the flavor's 300: a bigger base and the template's own steps
    # (one boot ran past 300 s, the probe unfinished).
    return vm.Variant("e2b-rt", "builder", 1, 512, timeout=600.0, template_warmup=warmup)


@pytest.fixture(scope="module")
def booted():
    b = builder_image.web_on_image()
    res = boot_template(b.built, builder_image.NAME, variant, require_done=False)
    res["user_uid"] = next(l.split(":")[2] for l in (b.built.tree / "etc/passwd").read_text().splitlines()
                           if l.startswith("user:"))
    return res


def judged(res: dict, check: str) -> dict:
    """The report as CHECK judges it. guest/template.sh ends by making the
    start command exit at once, on purpose (the warmup must then fail: its
    template_exits_* keys), so e2b-template.service is failed by the test
    itself by the time the units are listed; no_failed_units judges every
    other unit, as in a flavor's boot. (That the unit ran before the break
    is test_pool_warmup_passes and test_start_command_runs_as_user.)"""
    if check != "no_failed_units":
        return res
    rep = res["report"]
    assert rep.get("template_exits_rc") == "1", "the probe's deliberate break of the start command did not run"
    view = with_report(res, failed_units=" ".join(u for u in rep.get("failed_units", "").split() if u != TEMPLATE_UNIT),
                       services="\n".join(l for l in rep.get("services", "").splitlines()
                                          if f"Id={TEMPLATE_UNIT}" not in l.split()))
    view["report"].pop("journal_e2b_template_service", None)
    return view


@pytest.mark.parametrize("check", sorted(checks.checks_for(variant())))
def test_boot(booted, check):
    judge(booted, variant(), check, judged(booted, check))


def test_pool_warmup_passes(booted):
    assert_warmup_passed(booted)


def test_start_command_runs_as_user(booted):
    rep = booted["report"]
    assert "ActiveState=active" in rep.get("template_unit", ""), rep.get("template_unit")
    assert rep.get("template_uid") == booted["user_uid"] != "1000"


def test_port_reached_through_the_dynamic_relay(booted):
    assert "served by the web template's start command" in booted["report"].get("template_relay_body", "")
