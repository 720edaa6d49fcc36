"""`make templates host_warmup=uds|cid`: the pool template's hostWarmup runs
e2b-hostlink on the pool's host. Validated against the schema, then run for
real with {vsock_uds} pointing at the hybrid-vsock stand-in, with the envd
stand-in (and, for e2b-ci, a loopback /health for 49999) behind it."""
import json
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
from hostlink_helpers import fake_vmm, real_envd  # noqa: E402
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


def run_host(argv, uds, document="", generation="1"):
    argv = [a.replace("{vsock_uds}", str(uds)).replace("{clone_generation}", generation)
            .replace("{clone_document}", str(document)) for a in argv]
    env = {**os.environ, "PATH": f"{BUILD}:{os.environ['PATH']}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=200, env=env)


def test_cid_form(tmp_path):
    t = templates(tmp_path, "cid")
    hl = "e2b-hostlink --cid {vsock_cid}"
    assert t["e2b-rt"]["hostWarmup"] == [
        "sh", "-c", f"{hl} --timeout 10 clone --generation {{clone_generation}} --document {{clone_document}} && "
                    f"{hl} --timeout 10 wait --generation {{clone_generation}} && {hl} --timeout 10 wait"]
    assert t["e2b-ci"]["hostWarmup"][-1].startswith(t["e2b-rt"]["hostWarmup"][-1] + " && ")
    assert t["e2b-ci"]["hostWarmup"][-1].endswith("wait 49999")


@pytest.fixture
def envd(tmp_path):
    """The real envd, its port reached through a unix socket (unix:PATH)."""
    with real_envd(tmp_path) as sock:
        yield f"unix:{sock}"


def test_uds_host_warmup_fails_without_the_clone_step(tmp_path, envd):
    """A clone whose guest has no clone step, or that the step refused, is
    destroyed even though envd (the real one here) is ready. The warmup's
    success runs against real clones in tests/boot/test_clone_snapshot.py:
    its clone step steps the clock of the machine it runs on."""
    t = templates(tmp_path, "uds")
    doc = tmp_path / "clone.json"
    doc.write_text('{"instanceID": "isb-warmup"}')
    ci = LoopbackServer("http")
    try:
        with fake_vmm(tmp_path / "v.sock", {49983: envd, 49999: f"127.0.0.1:{ci.port}"}) as uds:
            for flavor in ("e2b-rt", "e2b-ci"):
                cp = run_host(t[flavor]["hostWarmup"], uds, doc)
                assert cp.returncode == 1, (flavor, cp.stderr)
                assert "a guest image without the clone step" in cp.stderr, cp.stderr
        with fake_vmm(tmp_path / "v.sock", {}) as uds:  # nothing listens: the clone is destroyed
            cp = run_host(t["e2b-rt"]["hostWarmup"], uds, doc)
            assert cp.returncode == 1 and "(clone step)" in cp.stderr
    finally:
        ci.close()
