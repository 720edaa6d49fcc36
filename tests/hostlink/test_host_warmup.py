"""`make templates host_warmup=uds|cid`: the pool template's hostWarmup runs
`e2b-hostlink restore` on the pool's host. Validated against the schema, then
run for real with {vsock_uds} pointing at the hybrid-vsock stand-in, with the
real envd behind it (in Firecracker mode, with a real mmds-serve, for the
warmup that succeeds: its clone step is the stand-in of guest_standins.py)
and, for e2b-ci, a loopback /health for 49999."""
import hashlib
import json
import secrets
import os
import pathlib
import subprocess
import sys

import jsonschema
import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "ci"))
sys.path.insert(0, str(HERE.parent / "relay"))

from harness import BUILD  # noqa: E402
from guest_standins import CloneStepStandIn  # noqa: E402
from hostlink_helpers import fake_vmm, real_envd, real_envd_fc  # noqa: E402
from ocifixture import make_flavor_dir  # noqa: E402
from relay_helpers import ROOT, LoopbackServer  # noqa: E402

SCHEMA = json.loads((ROOT / "ci" / "pool-template.schema.json").read_text())
REG = "registry.example.test:5000/e2b"


def templates(tmp, transport):
    for f in ("e2b-rt", "e2b-ci"):
        make_flavor_dir(tmp, f, payload=f.encode())
    cp = subprocess.run(["make", "--no-print-directory", "-s", "templates", f"out={tmp}", f"registry={REG}",
                         "flavors=e2b-rt e2b-ci", f"host_warmup={transport}"], cwd=ROOT, capture_output=True,
                        text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    out = {}
    for f in ("e2b-rt", "e2b-ci"):
        t = json.loads((tmp / "templates" / f"{f}.json").read_text())
        jsonschema.validate(t, SCHEMA)
        out[f] = t
    return out


def run_host(argv, uds, document="", generation="1", token_file=""):
    argv = [a.replace("{vsock_uds}", str(uds)).replace("{clone_generation}", generation)
            .replace("{clone_document}", str(document)).replace("{access_token_file}", str(token_file))
            for a in argv]
    env = {**os.environ, "PATH": f"{BUILD}:{os.environ['PATH']}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=200, env=env)


def test_cid_form(tmp_path):
    t = templates(tmp_path, "cid")
    hl = "e2b-hostlink --cid {vsock_cid}"
    assert t["e2b-rt"]["hostWarmup"] == [
        "sh", "-c", f"{hl} --timeout 30 restore --generation {{clone_generation}} --document {{clone_document}} "
                    "--token-file {access_token_file}"]
    assert t["e2b-ci"]["hostWarmup"] == [
        "sh", "-c", t["e2b-rt"]["hostWarmup"][-1] + f" && {hl} --timeout 120 wait 49999"]


@pytest.fixture
def envd(tmp_path):
    """The real envd, its port reached through a unix socket (unix:PATH)."""
    with real_envd(tmp_path) as sock:
        yield f"unix:{sock}"


def test_uds_host_warmup_restores_a_clone(release_tools, tmp_path):
    """The whole hostWarmup, each flavor: the clone step (stand-in) installs
    the clone's document into the real mmds-serve, and the real envd takes
    the clone's token at /init; afterwards envd wants that token."""
    t = templates(tmp_path, "uds")
    ci = LoopbackServer("http")
    try:
        for flavor in ("e2b-rt", "e2b-ci"):
            work = tmp_path / f"clone-{flavor}"
            work.mkdir()
            token = secrets.token_hex(32)
            (work / "token").write_text(token)
            (work / "clone.json").write_text(json.dumps(
                {"instanceID": f"isb-{flavor}", "accessTokenHash": hashlib.sha512(token.encode()).hexdigest()}))
            with real_envd_fc(work, release_tools.path("mmds-serve")) as (envd, ctl):
                step = CloneStepStandIn(work / "step.sock", ctl)
                try:
                    with fake_vmm(work / "v.sock", {49983: f"unix:{envd}", 49999: f"127.0.0.1:{ci.port}",
                                                    10053: f"unix:{step.path}"}) as uds:
                        cp = run_host(t[flavor]["hostWarmup"], uds, work / "clone.json", "1", work / "token")
                finally:
                    step.close()
            assert cp.returncode == 0, (flavor, cp.stderr)
            assert [line.split()[0] for line in cp.stdout.splitlines()] == [
                "step=clone", "step=health", "step=init", "step=check", "step=restore"], cp.stdout
    finally:
        ci.close()


def test_uds_host_warmup_fails_without_the_clone_step(tmp_path, envd):
    """A clone whose guest has no clone step, or that the step refused, is
    destroyed even though envd (the real one here) is ready. With the real
    e2b-clone (which steps the clock of the machine it runs on) the warmup
    runs against real clones in tests/boot/test_clone_snapshot.py."""
    t = templates(tmp_path, "uds")
    doc, token = tmp_path / "clone.json", tmp_path / "token"
    doc.write_text('{"instanceID": "isb-warmup"}')
    token.write_text("abc")
    ci = LoopbackServer("http")
    try:
        with fake_vmm(tmp_path / "v.sock", {49983: envd, 49999: f"127.0.0.1:{ci.port}"}) as uds:
            for flavor in ("e2b-rt", "e2b-ci"):
                cp = run_host(t[flavor]["hostWarmup"], uds, doc, token_file=token)
                assert cp.returncode == 1, (flavor, cp.stderr)
                assert "a guest image without the clone step" in cp.stderr, cp.stderr
        with fake_vmm(tmp_path / "v.sock", {}) as uds:  # nothing listens: the clone is destroyed
            cp = run_host(t["e2b-rt"]["hostWarmup"], uds, doc, token_file=token)
            assert cp.returncode == 1 and "(clone step)" in cp.stderr
    finally:
        ci.close()
