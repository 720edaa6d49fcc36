"""Boot an E2B template: examples/templates/e2b-sdk, its JSON written by the
real Python SDK (tests/e2b_example.py), on e2b-base (its fromTemplate base): python3's http.server on
3000 as its own user `app` in /opt/app, with an ENV, and E2B's
wait_for_port(3000) as its ready check. Once, in QEMU like the flavors
(tests/boot/vm.py), with guest/template.sh in the probe:

- the pool's warmup for it (ci/templates.py, from the image's labels) runs
  in the clone and passes: envd, then the ready command;
- the start unit runs after envd, as `app`, with the template's ENV, which a
  login shell does not get (as on E2B);
- the copied file has the owner and mode the SDK asked for;
- its port is reached from the host side through the dynamic relay;
- a start command that exits at once fails the warmup, saying so; put back,
  the warmup passes again;
- then E2B's real SDK from the host (tests/sdk/probe_template.py): /init with
  the defaults the pool's restore passes (its labels: the steps' last USER
  and WORKDIR), a command that runs as `app` in /opt/app, and the server at
  getHost(3000).

The web example (template.conf) boots in the image workflow
(template_web_boot.py)."""
import pathlib
import sys

import pytest

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import e2b_example  # noqa: E402
import vm  # noqa: E402
from template_boots import boot_template  # noqa: E402

GREETING = "hello from an E2B template"


@pytest.fixture(scope="module")
def built():
    return e2b_example.built_or_fail()


@pytest.fixture(scope="module")
def booted(built):
    labels = built.manifest["labels"]
    env = (("E2B_SDK_DEFAULT_USER", labels["org.e2b-images.envd-user"]),
           ("E2B_SDK_DEFAULT_WORKDIR", labels["org.e2b-images.envd-workdir"]))
    return boot_template(built, e2b_example.NAME, lambda warmup: vm.Variant(
        "e2b-base", "template-e2b", 1, 512, timeout=600.0, template_warmup=warmup,
        template_probe=(("GET", "/"), ("ENV", "GREETING"), ("FILE", "/opt/app/server.py")),
        sdk=True, sdk_probes=("py-template",), sdk_env=env))


def report(booted):
    return booted["report"]


def test_pool_warmup_passes(booted):
    r = report(booted)
    assert r.get("template_warmup_rc") == "0", r.get("template_warmup_err")


def test_start_command_runs_as_its_user_after_envd(booted, built):
    r = report(booted)
    unit = r.get("template_unit", "")
    assert "ActiveState=active" in unit and "enabled=enabled" in unit and "envd.service" in unit, unit
    app = next(line.split(":") for line in (built.tree / "etc/passwd").read_text().splitlines()
               if line.startswith("app:"))
    assert r.get("template_uid") == app[2]


def test_the_env_reaches_the_start_command_not_a_login_shell(booted):
    r = report(booted)
    assert r.get("template_start_env", "").strip() == f"GREETING={GREETING}", r.get("template_start_env")
    assert r.get("template_env", "").strip() == "GREETING="


def test_copied_file_has_the_owner_and_mode_asked_for(booted):
    assert report(booted).get("template_file", "").strip() == "app:app 755"


def test_port_reached_through_the_dynamic_relay(booted):
    assert report(booted).get("template_relay_body", "").strip() == GREETING


def test_warmup_fails_when_the_start_command_exits_and_passes_when_back(booted):
    r = report(booted)
    err = r.get("template_exits_err", "")
    assert r.get("template_exits_rc") == "1"
    assert "template e2b-sdk: its start command failed (e2b-template.service)" in err, err
    assert r.get("template_again_rc") == "0"


def sdk_case(booted, name):
    run = booted.get("sdk", {}).get("py-template")
    assert run, f"the SDK probe did not run: {booted.get('error')}"
    obs = run["cases"].get(name)
    assert obs is not None and "error" not in obs, f"{name}: {obs} (rc {run['rc']}): {run['tail'][-1500:]}"
    return obs


def test_sdk_init_with_the_templates_defaults(booted):
    obs = sdk_case(booted, "template_init")
    assert obs["initStatus"] == 204
    assert obs["stdout"] == "app\n/opt/app\nGREETING=\n"


def test_sdk_reaches_the_start_command_through_get_host(booted):
    obs = sdk_case(booted, "template_host")
    assert obs["host"] == "localhost:3000" and obs["status"] == 200 and obs["body"] == GREETING + "\n", obs
