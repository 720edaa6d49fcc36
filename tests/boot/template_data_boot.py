"""Boot examples/templates/data (e2b-ci with sqlite3, a file and a build
command; ready = file /home/user/data/example.db) once, in QEMU like the
flavors (tests/boot/vm.py), at the template's own size (2 vCPU, 2 GiB), with
guest/template.sh in the probe. Every check an e2b-ci boot gets
(tests/boot/checks.py: the guard, envd through MMDS, the code interpreter
on :49999, no failed units, the host's drops, …) runs against this boot, and
the pool's warmup for the template (ci/templates.py, from the image's
labels: envd, then the ready file) passes in the clone.

Its build is checked here too (what the template adds, its labels), before
the boot: make test builds only the web example.

Not a test_*.py: an e2b-ci template boot costs about as much as the e2b-ci
boot (5-6 minutes under TCG), more than `make test` can afford next to it,
so the image workflow (ci/image.yml) runs it by name:

    /usr/bin/python3 -m pytest -p no:cacheprovider -ra tests/boot/template_data_boot.py

guest/template.sh is written for the web example: its steps after the
warmup (the start unit, port 3000, SITE_DIR) report facts this test does
not read; data has no start command, so they find no unit."""
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "ci"))

import checks  # noqa: E402
import testimages  # noqa: E402
import vm  # noqa: E402
from template_boots import assert_warmup_passed, boot_template, judge  # noqa: E402
from template_warmup import template_spec  # noqa: E402
from templates import FLAVORS  # noqa: E402

READY_FILE = "/home/user/data/example.db"


def variant(warmup: str = "") -> vm.Variant:
    # The template's own defaults (vcpu = 2, memory_mb = 2048 in its template.conf).
    return vm.Variant("e2b-ci", "template-data", 2, 2048, timeout=720.0, template_warmup=warmup)


@pytest.fixture(scope="module")
def built():
    b = testimages.template_image("data", "e2b-ci")
    if not b.ok:
        pytest.fail(b.failure())
    return b


def test_data_adds_package_file_and_build_command(built):
    t = built.tree
    assert "sqlite3" in {p["name"] for p in built.manifest["packages"]}
    # Still e2b-ci: Jupyter from the venv (pydeps=pip, the default) or Debian's.
    venv = {p["name"] for p in built.manifest.get("python_packages", [])}
    debs = {p["name"] for p in built.manifest["packages"]}
    assert "jupyter_server" in venv or "python3-jupyter-server" in debs, sorted(venv)[:10]
    db = t / "home/user/data/example.db"
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"
    assert db.stat().st_uid == 1000
    assert b"Tallinn" in db.read_bytes()
    labels = testimages.check_labels(built, "data", "e2b-ci", "10000,10052,10053,49983,49999")
    assert labels["org.e2b-images.ready"] == "file /home/user/data/example.db"


def test_pool_warmup_waits_for_the_ready_file(built):
    warmup = template_spec(built.out, "data", FLAVORS)["warmup"]
    assert warmup[:2] == ["sh", "-c"] and READY_FILE in warmup[2], warmup


@pytest.fixture(scope="module")
def booted(built):
    return boot_template(built, "data", variant)


@pytest.mark.parametrize("check", sorted(checks.checks_for(variant())))
def test_boot(booted, check):
    judge(booted, variant(), check)


def test_pool_warmup_passes(booted):
    assert_warmup_passed(booted)


def test_no_start_command(booted):
    # data has no `start`: no e2b-template.service, so nothing of it can fail or restart.
    rep = booted["report"]
    assert "e2b-template.service" not in rep.get("failed_units", "")
    assert "ActiveState=active" not in rep.get("template_unit", ""), rep.get("template_unit")
