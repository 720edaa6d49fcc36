"""Boot an E2B template on `fromTemplate("code-interpreter-v1")`: its JSON
written by the real Python SDK (tests/e2b_example.py's sdk_json), built on
e2b-ci, with a start command (python3's http.server on 3000 in a WORKDIR, an
ENV, a copied file) and E2B's wait_for_port(3000) as its ready check. Once,
in QEMU at e2b-ci's medium size, with guest/template.sh in the probe:

- every e2b-ci boot check (tests/boot/checks.py: the guard, envd through
  MMDS, Jupyter and the code interpreter on :49999, no failed units, the
  host's drops, ...) holds with the template's start command beside them;
- the pool's warmup for it passes (envd, then its ready command);
- the start unit runs after envd as `user`, with the ENV, in the workdir,
  and its port answers through the dynamic relay;
- a start command that exits at once fails the warmup, saying so.

Not a test_*.py: an e2b-ci template boot costs about as much as the e2b-ci
boot (5-6 minutes under TCG, more with the build), which `make test` cannot
afford next to its own; the image workflow (ci/image.yml) runs it by name:

    /usr/bin/python3 -m pytest -p no:cacheprovider -ra tests/boot/template_ci_boot.py
"""
import pathlib
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import checks  # noqa: E402
import e2b_example  # noqa: E402
import testimages  # noqa: E402
import vm  # noqa: E402
from template_boots import assert_warmup_passed, boot_template, judge, with_report  # noqa: E402

NAME = "ci-app"
PAGE = "served beside Jupyter\n"
TEMPLATE_PY = """from e2b import Template, wait_for_port
template = (
    Template()
    .from_template("code-interpreter-v1")
    .set_workdir("/home/user/app")
    .copy("index.html", "index.html")
    .set_envs({"APP_GREETING": "beside jupyter"})
    .set_start_cmd("python3 -m http.server 3000", wait_for_port(3000))
)
print(Template.to_json(template))
"""


def variant(warmup: str = "") -> vm.Variant:
    return vm.Variant("e2b-ci", "template-ci", 2, 1024, timeout=720.0, template_warmup=warmup,
                      template_probe=(("GET", "/index.html"), ("ENV", "APP_GREETING"),
                                      ("FILE", "/home/user/app/index.html")))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = tmp_path_factory.mktemp("src") / NAME
    src.mkdir()
    (src / "template.py").write_text(TEMPLATE_PY)
    (src / "index.html").write_text(PAGE)
    e2b_example.sdk_json(src)
    out = testimages.ROOT / "out" / "test-templates"
    b = testimages.Built("e2b-ci", out / NAME, testimages.build_template(src, "e2b-ci", out))
    if not b.ok:
        pytest.fail(b.failure())
    return b


def test_built_on_e2b_ci(built):
    labels = testimages.check_labels(built, NAME, "e2b-ci", "10000,10052,10053,49983,49999")
    assert labels["org.e2b-images.ready"] == "command /usr/lib/e2b-template/ready"
    assert labels["org.e2b-images.envd-user"] == "user"
    assert labels["org.e2b-images.envd-workdir"] == "/home/user/app"
    assert (built.tree / "usr/lib/systemd/system/e2b-template.service").exists()
    assert (built.tree / "usr/lib/systemd/system/code-interpreter.service").exists()


@pytest.fixture(scope="module")
def booted(built):
    return boot_template(built, NAME, variant)


def judged(res: dict, check: str) -> dict:
    """The report as CHECK judges it: listeners_allowed knows the image's own
    listeners, and the template's start command (http.server on 0.0.0.0:3000,
    the user's port, reached through the relay) is the template's, not the
    image's; every other listener is judged as in e2b-ci's boot."""
    if check != "listeners_allowed":
        return res
    listeners = res["report"].get("listeners", "").splitlines()
    return with_report(res, listeners="\n".join(l for l in listeners if not l.endswith(":3000")))


@pytest.mark.parametrize("check", sorted(checks.checks_for(variant())))
def test_boot(booted, check):
    judge(booted, variant(), check, judged(booted, check))


def test_pool_warmup_passes(booted):
    assert_warmup_passed(booted)


def test_start_command_runs_beside_jupyter(booted):
    rep = booted["report"]
    unit = rep.get("template_unit", "")
    assert "ActiveState=active" in unit and "envd.service" in unit, unit
    assert rep.get("template_uid") == "1000"
    assert rep.get("template_start_env", "").strip() == "APP_GREETING=beside jupyter"
    assert rep.get("template_relay_body", "") == PAGE.strip()
    assert rep.get("template_file", "").startswith("user:user "), rep.get("template_file")


def test_warmup_fails_when_the_start_command_exits(booted):
    rep = booted["report"]
    assert rep.get("template_exits_rc") == "1"
    assert f"template {NAME}: its start command failed" in rep.get("template_exits_err", "")
    assert rep.get("template_again_rc") == "0"
