"""Clone safety on a real snapshot (issue #19): the e2b-base image (E2B's
default sandbox, e2b-rt and its tools; E2B_CLONE_FLAVOR=e2b-rt for the
runtime alone) booted warm under QEMU, snapshotted with `savevm`, and
restored twice per configuration with `-loadvm` (tests/boot/snapshot.py).

Configurations: "plain" (no VM generation id device, a CPU without RDRAND)
and "vmgenid" (QEMU's `-device vmgenid`, a new id at every start). In each
clone, first without the clone step: the CRNG's first bytes, the clock, a
token minted just before the snapshot, the warmup with `--generation`; then
the pool's own hostWarmup (ci/templates.py: the clone step, wait
--generation, wait) and the same again.

Everything compared is written to out/clone-test/report.json (random_hex per
clone and case, clock_skew_ms, old_token_status, warmup_before_step /
warmup_after_step, and what vmgenid changed), so anyone can check the
comparisons by reading it. `make clone-test` runs this file alone; with
E2B_CLONE_ROOTFS=PATH it takes that rootfs.ext4 instead of building the test
image (of E2B_CLONE_FLAVOR). In each clone E2B's SDK in normal mode runs
commands, and on e2b-base every tool of E2B's base answers. About 4.5
minutes under TCG on top of the shared image build (two warm
boots of ~80 s, four clones of ~15 s, 20 s of snapshot age each).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent / "ci"))
sys.path.insert(0, str(HERE.parent / "sdk"))
sys.path.insert(0, str(HERE.parent / "relay"))

import harness  # noqa: E402
from relay_helpers import wait_port  # noqa: E402
import sdk_helpers  # noqa: E402
import snapshot  # noqa: E402
import templates  # noqa: E402
import testimages  # noqa: E402
import vm  # noqa: E402

OUT = pathlib.Path(os.environ.get("E2B_OUT", vm.ROOT / "out")) / "clone-test"
FLAVOR = os.environ.get("E2B_CLONE_FLAVOR", "e2b-base")
# What E2B's base has (os-image/README.md, "e2b-base"), checked in each clone.
BASE_TOOLS = ("python3", "pip", "pip3", "node", "npm", "yarn", "gcc", "make", "git", "gh", "curl")
AGE_S = 20  # how long the snapshot waits before its clones start, at least
CONFIGS = {"plain": False, "vmgenid": True}
# The envd the image ships (built from [envd-source]): the version a control
# plane hands the SDK with the sandbox.
ENVD_VERSION = testimages.lock_stanza(testimages.SHIPPED_ENVD_LOCK, "envd-source")["version"]


def token_hash(token_file: str) -> str:
    """The document's accessTokenHash for the token in TOKEN_FILE."""
    return hashlib.sha512(pathlib.Path(token_file).read_bytes()).hexdigest()



def warm_boot(t: snapshot.Template, template_doc: pathlib.Path, tokens: dict) -> dict:
    """Boots the template, shows that the clone step refuses CID 1 by
    default, admits it with the test drop-in, gives envd the template's
    access token (whose hash the template's document holds), prepares and
    snapshots."""
    with snapshot.Machine(t.work, "warm", t.argv(t.overlay, template_doc)) as m:
        ready = m.line(timeout=600)
        refused = m.hostlink("clone", "--generation", "1")
        # The clone step's units as the guest sees them, for a report that failed.
        units = base64.b64decode(m.ask("diag").get("diag_b64", "")).decode(errors="replace")
        allowed = m.ask("allow-cid1")
        init = m.hostlink("--timeout", str(TCG_WARMUP_BUDGET), "init", "--token-file", tokens["template"],
                          timeout=TCG_WARMUP_BUDGET + 30)
        # The resident step killed: systemd starts it again, and that
        # process (the one in the snapshot) serves prepare-snapshot and,
        # in every clone, the step.
        restarted = m.ask("kill-clone")
        prepared = m.hostlink("prepare-snapshot")
        minted = m.ask("mint")
        time.sleep(1)  # the sampler is back in its read of the control line
        saved = m.monitor(f"savevm {snapshot.SNAPSHOT}")
        snap_ms = snapshot.host_ms()
        m.monitor("quit", timeout=30)
    return {"ready": ready, "refused_cid1": {"rc": refused.returncode, "stderr": refused.stderr.strip(),
                                             "clone_units": units.splitlines()},
            "allowed": allowed, "restarted": restarted,
            "template_init": {"rc": init.returncode, "out": init.stdout.strip(), "stderr": init.stderr.strip()},
            "prepare": {"rc": prepared.returncode, "out": prepared.stdout.strip(), "stderr": prepared.stderr.strip()},
            "minted": minted, "savevm_output": saved, "snapshot_host_ms": snap_ms}


def sample(m: snapshot.Machine) -> dict:
    got = m.ask("sample")
    now = snapshot.host_ms()
    return {"random_hex": got.get("random"), "clock_skew_ms": int(got["realtime_us"]) // 1000 - now,
            "host_ms": now}


TCG_WARMUP_BUDGET = 120  # seconds for the pool's restore, under TCG (its budget is a KVM pool's)


def restore_steps(stdout: str) -> dict:
    """`e2b-hostlink restore`'s lines (`step=NAME ms=N [detail]`) by step."""
    steps = {}
    for line in stdout.splitlines():
        head, _, detail = line.partition(" ")
        if not head.startswith("step="):
            continue
        ms, _, detail = detail.partition(" ")
        assert ms.startswith("ms="), line
        steps[head[len("step="):]] = {"ms": int(ms[len("ms="):]), "detail": detail}
    return steps


def sdk_normal_mode(m: snapshot.Machine, token: str, others: list) -> dict:
    """E2B's Python SDK in normal mode (clone_sdk_probe.py) with the
    clone's token, through `e2b-hostlink forward` to the clone's envd, as a
    pool's host serves it; and envd's answer to each token in OTHERS."""
    port = harness.free_port()
    fwd = subprocess.Popen([str(vm.HOSTLINK), "--uds", str(m.uds), "--timeout", str(TCG_WARMUP_BUDGET), "forward",
                            "--listen", f"127.0.0.1:{port}", "49983"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_port(port, fwd)
        cp = subprocess.run([str(sdk_helpers.py_sdk()), str(HERE / "clone_sdk_probe.py"), f"http://127.0.0.1:{port}",
                             ENVD_VERSION, token, *others], capture_output=True, text=True, timeout=600,
                            env={**os.environ, "E2B_CLONE_TOOLS": " ".join(BASE_TOOLS) if FLAVOR == "e2b-base" else ""})
        if cp.returncode != 0:
            return {"error": cp.stderr[-3000:]}
        return json.loads(cp.stdout.strip().splitlines()[-1])
    finally:
        fwd.terminate()
        fwd.wait(10)


def one_clone(t: snapshot.Template, name: str, template_doc: pathlib.Path, snap_ms: int, tokens: dict) -> dict:
    doc = t.work / f"{name}.json"
    doc.write_text(json.dumps({"instanceID": f"isb-{name}", "envID": "tmpl-clone-test", "address": "",
                               "accessTokenHash": token_hash(tokens[name])}))
    disk = t.clone_disk(name)
    argv = t.argv(disk, template_doc) + ["-loadvm", snapshot.SNAPSHOT]
    rec: dict = {"document_instance_id": f"isb-{name}"}
    with snapshot.Machine(t.work, name, argv) as m:
        first = sample(m)  # the first thing the restored guest does
        rec["no_step"] = {**first, "snapshot_age_ms": first["host_ms"] - snap_ms,
                          "old_token_status": int(m.ask("token")["old_token_status"])}
        before = m.hostlink("--timeout", "5", "wait", "--generation", "1")
        rec["warmup_before_step"] = {"rc": before.returncode, "stderr": before.stderr.strip()}
        # envd's /init with the clone's token before the step: the document
        # is still the template's, whose hash is the template token's.
        init = m.hostlink("--timeout", str(TCG_WARMUP_BUDGET), "init", "--token-file", tokens[name],
                          timeout=TCG_WARMUP_BUDGET + 30)
        rec["init_before_step"] = {"rc": init.returncode, "stderr": init.stderr.strip()}
        # The pool template's own hostWarmup: one restore (clone step,
        # envd's health, /init with the clone's token, the token check).
        warmup = [a.replace("{vsock_uds}", str(m.uds)).replace("{clone_generation}", "1")
                  .replace("{clone_document}", str(doc)).replace("{access_token_file}", tokens[name])
                  for a in templates.host_warmup(FLAVOR, "uds")]
        assert warmup[:2] == ["sh", "-c"] and " restore --generation 1 " in warmup[2], warmup
        # Its budget is a KVM pool's; this guest runs under TCG (snapshot.py),
        # about ten times slower. What this checks is the order and the
        # outcome, so the budget is scaled, and recorded.
        budget = f"--timeout {templates.RESTORE_BUDGET_S} "
        assert budget in warmup[2], warmup
        warmup[2] = warmup[2].replace(budget, f"--timeout {TCG_WARMUP_BUDGET} ")
        rec["warmup_budget_s"] = TCG_WARMUP_BUDGET
        env = {**os.environ, "PATH": f"{vm.HOSTLINK.parent}:{os.environ['PATH']}"}
        cp = vm.run("sh", "-c", warmup[2], check=False, timeout=TCG_WARMUP_BUDGET + 30, env=env)
        rec["step"] = sample(m)
        steps = restore_steps(cp.stdout)
        rec["restore_steps_ms"] = {k: v["ms"] for k, v in steps.items()}
        rec["warmup_after_step"] = {"rc": cp.returncode, "stdout": cp.stdout.strip(), "stderr": cp.stderr.strip(),
                                    "clone_answer": "OK " + steps.get("clone", {}).get("detail", "")}
        rec["step"]["old_token_status"] = int(m.ask("token")["old_token_status"])
        others = [tokens["template"]] + [f for n, f in tokens.items() if n not in (name, "template")]
        rec["sdk"] = sdk_normal_mode(m, tokens[name], others)
        rec["state"] = m.ask("state")
        rec["vmgenid"] = m.ask("vmgenid")
        m.monitor("quit", timeout=30)
    snapshot.remove(disk)
    return rec


def run_configuration(rootfs: pathlib.Path, name: str, vmgenid: bool) -> dict:
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"e2b-clone-{name}-"))
    try:
        t = snapshot.Template(rootfs, work, vmgenid)
        # An access token each: the template's envd's, then each clone's own.
        tokens = {}
        for who in ("template", f"{name}-A", f"{name}-B"):
            tokens[who] = str(work / f"{who}.token")
            fd = os.open(tokens[who], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, secrets.token_hex(24).encode())
            os.close(fd)
        template_doc = work / "template.json"
        template_doc.write_text(json.dumps(vm.make_document(token_hash(tokens["template"]))))
        t0 = time.monotonic()
        res: dict = {"qemu": t.argv(t.overlay, template_doc), "warm": warm_boot(t, template_doc, tokens)}
        res["warm_s"] = round(time.monotonic() - t0, 1)
        time.sleep(max(0.0, AGE_S - (snapshot.host_ms() - res["warm"]["snapshot_host_ms"]) / 1000))
        res["clones"] = {}
        for clone in ("A", "B"):
            t1 = time.monotonic()
            res["clones"][clone] = one_clone(t, f"{name}-{clone}", template_doc, res["warm"]["snapshot_host_ms"],
                                             tokens)
            res["clones"][clone]["wall_s"] = round(time.monotonic() - t1, 1)
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


_RUNS: dict = {}


@pytest.fixture(scope="module")
def report():
    """Both configurations, once per session, under the one-QEMU lock of
    the caller (make clone-test / make test run pytest under it)."""
    built = testimages.image(FLAVOR) if not os.environ.get("E2B_CLONE_ROOTFS") else None
    if built is not None and not built.ok:
        pytest.fail(built.failure())
    rootfs = pathlib.Path(os.environ.get("E2B_CLONE_ROOTFS") or built.dir / "rootfs.ext4")
    rep = {"rootfs": str(rootfs), "configs": {}}
    for name, vmgenid in CONFIGS.items():
        try:
            rep["configs"][name] = run_configuration(rootfs, name, vmgenid)
        except Exception as e:  # the report names it; each test then fails on the missing part
            rep["configs"][name] = {"error": f"{type(e).__name__}: {e}"}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "report.json").write_text(json.dumps(rep, indent=2) + "\n")
    return rep


def config(report, name) -> dict:
    c = report["configs"][name]
    assert "error" not in c, c["error"]
    return c


def test_warm_template_refuses_cid1_by_default_then_prepares(report):
    for name in CONFIGS:
        w = config(report, name)["warm"]
        assert w["ready"].get("envd") == "204" and w["ready"].get("token_status") == "200", w["ready"]
        # The shipped policy (CID 2 alone) over vsock_loopback: refused, said so.
        assert w["refused_cid1"]["rc"] == 1
        assert "clone refused: ERR vsock peer CID 1 refused" in w["refused_cid1"]["stderr"], w["refused_cid1"]
        assert w["prepare"]["rc"] == 0, w["prepare"]
        # The image masks systemd-random-seed (os-image/README.md): no seed was ever written.
        assert w["prepare"]["out"] == "OK prepared random_seed=absent token_key=rotated generation=absent synced=yes"
        assert w["minted"].get("token_status") == "200" and w["savevm_output"] == "", w
        # envd took the template's token (its hash is the template document's).
        assert w["template_init"]["rc"] == 0 and "step=check " in w["template_init"]["out"], w["template_init"]


def test_resident_step_restarted_and_in_every_clone(report):
    """e2b-clone runs from boot, before any connection to its port; killed,
    systemd starts it again; and that one process, from the snapshot, is
    what served the clone step in every clone: no clone started a process
    for it."""
    for name in CONFIGS:
        c = config(report, name)
        w = c["warm"]
        assert w["ready"].get("clone_pid", "0") not in ("0", ""), w["ready"]
        assert w["allowed"].get("clone_pid", "0") not in ("0", ""), w["allowed"]
        r = w["restarted"]
        assert r["clone_pid_before"] == w["allowed"]["clone_pid"], r
        assert r["clone_pid"] not in ("0", r["clone_pid_before"]) and r["restarts"] == "1", r
        for clone, rec in c["clones"].items():
            assert rec["state"]["clone_pid"] == r["clone_pid"], (name, clone, rec["state"], r)
            assert rec["warmup_after_step"]["clone_answer"].startswith("OK generation=1 "), rec


def test_without_the_step_clones_share_crng_output(report):
    """The hazard in our own setup: two clones of one snapshot, no vmgenid
    device, no RDRAND: the same "random" bytes in both."""
    a, b = (config(report, "plain")["clones"][c]["no_step"]["random_hex"] for c in "AB")
    assert a and len(a) == 32 and a == b


def test_without_the_step_the_clock_lags_by_the_snapshots_age(report):
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            s = rec["no_step"]
            assert s["snapshot_age_ms"] >= AGE_S * 1000
            # Behind the host by about the time the snapshot waited (the
            # guest's clock stood still meanwhile), give or take 3 s.
            assert abs(-s["clock_skew_ms"] - s["snapshot_age_ms"]) < 3000, (name, clone, s)


def test_without_the_step_a_template_token_still_works_and_warmup_fails(report):
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            assert rec["no_step"]["old_token_status"] == 200, (name, clone)
            w = rec["warmup_before_step"]
            assert w["rc"] == 1 and "not at generation 1" in w["stderr"], (name, clone, w)
            # Without the step the document is the template's: envd refuses
            # the clone's own token, and says why.
            i = rec["init_before_step"]
            assert i["rc"] == 1 and "401" in i["stderr"], (name, clone, i)


def test_the_step_gives_each_clone_fresh_entropy(report):
    for name in CONFIGS:
        clones = config(report, name)["clones"]
        a, b = (clones[c]["step"]["random_hex"] for c in "AB")
        assert a and b and a != b, name
        for c in "AB":
            assert clones[c]["step"]["random_hex"] != clones[c]["no_step"]["random_hex"]
            assert "entropy_bits=256 crng=reseeded" in clones[c]["warmup_after_step"]["clone_answer"]


def test_the_step_sets_the_hosts_clock(report):
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            assert abs(rec["step"]["clock_skew_ms"]) < 1000, (name, clone, rec["step"])


def test_the_step_refuses_old_tokens_and_installs_the_document(report):
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            assert rec["step"]["old_token_status"] == 401, (name, clone)
            assert rec["state"]["instance_id"] == rec["document_instance_id"], (name, clone, rec["state"])
            assert rec["state"]["generation"] == "1"


def test_warmup_passes_only_after_the_step(report):
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            w = rec["warmup_after_step"]
            assert w["rc"] == 0, (name, clone, w)
            assert w["clone_answer"].startswith("OK generation=1 "), w
            assert "token_key=rotated document=installed" in w["clone_answer"], w


def test_machine_id_renewed_per_clone(report):
    for name in CONFIGS:
        clones = config(report, name)["clones"]
        assert all("machine_id=renewed" in clones[c]["warmup_after_step"]["clone_answer"] for c in "AB")
        assert clones["A"]["state"]["machine_id"] != clones["B"]["state"]["machine_id"]


def test_vmgenid_findings_are_reported(report):
    """What -device vmgenid changes is recorded, not assumed: whether the
    kernel has a device and binds it, whether a NEW_VMGENID uevent came, and
    whether the first bytes after restore differ without the step."""
    c = config(report, "vmgenid")
    for clone in "AB":
        v = c["clones"][clone]["vmgenid"]
        assert {"vmgenid_device", "vmgenid_bound", "new_vmgenid_uevents", "kernel"} <= set(v), v
    a, b = (c["clones"][x]["no_step"]["random_hex"] for x in "AB")
    print(f"vmgenid: first bytes after restore {'differ' if a != b else 'are the same'} without the step; "
          f"guest: {c['clones']['A']['vmgenid']}")


def test_restore_gives_each_clone_its_own_token(report):
    """After the pool's one restore command, E2B's SDK in normal mode runs
    a command with the clone's own token; the template's token and the
    other clone's get 401 there. Each step's time is in the report."""
    for name in CONFIGS:
        for clone, rec in config(report, name)["clones"].items():
            sdk = rec["sdk"]
            assert "error" not in sdk, (name, clone, sdk)
            assert sdk["commands_run"].get("exit_code") == 0, (name, clone, sdk)
            assert sdk["commands_run"]["stdout"].split()[0] == "42", (name, clone, sdk)
            assert sdk["own_token_status"] == 200, (name, clone, sdk)
            # The template's token, then the other clone's.
            assert sdk["other_token_status"] == [401, 401], (name, clone, sdk)
            if FLAVOR == "e2b-base":
                assert sdk["tools"] == {"stdout": "tools-ok", "exit_code": 0}, (name, clone, sdk)
            assert set(rec["restore_steps_ms"]) == {"clone", "health", "init", "check", "restore"}, rec
            print(f"restore {name}-{clone}: {rec['restore_steps_ms']} (ms, QEMU/TCG)")
