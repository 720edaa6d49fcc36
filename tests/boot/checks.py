"""What a booted guest must show (shared by tests/boot/test_boot.py and vm.py).

Each check takes the result of vm.boot() and returns (ok, detail). The probe
only reports facts; every expectation lives here.
"""
from __future__ import annotations

import json

import vsock_checks

WARMUP_TRIES = 200  # the pool warmup: 200 x 50 ms (ci/templates.py uses the same)


def _rep(res):
    return res.get("report", {})


def booted(res):
    rep = _rep(res)
    return rep.get("done") == "1", res.get("error") or f"probe done after {res.get('host_wall_s')} s ({res.get('accel')})"


def guard_check(res):
    rep = _rep(res)
    return rep.get("guard_check_rc") == "0", f"rc={rep.get('guard_check_rc')} {rep.get('guard_check_out', '')[:300]!r}"


def envd_health(res):
    rep = _rep(res)
    code, tries = rep.get("envd_health_code"), int(rep.get("envd_health_tries") or 0)
    return (code == "204" and 0 < tries <= WARMUP_TRIES,
            f"GET /health -> {code} after {tries} of {WARMUP_TRIES} tries ({rep.get('envd_wait_ms')} ms from probe start)")


def sandbox_id(res):
    got, want = _rep(res).get("sandbox_id"), res.get("document", {}).get("instanceID")
    return bool(want) and got == want, f"/run/e2b/.E2B_SANDBOX_ID={got!r}, document instanceID={want!r}"


def template_id(res):
    got, want = _rep(res).get("template_id"), res.get("document", {}).get("envID")
    return bool(want) and got == want, f"/run/e2b/.E2B_TEMPLATE_ID={got!r}, document envID={want!r}"


def mmds_flow(res):
    rep = _rep(res)
    body = rep.get("mmds_body", "")
    try:
        doc = json.loads(body)
    except ValueError:
        return False, f"token length {rep.get('mmds_token_len')}, GET / body not JSON: {body[:200]!r}"
    return (int(rep.get("mmds_token_len") or 0) > 0 and doc == res.get("document"),
            f"token length {rep.get('mmds_token_len')}, GET / -> {body[:200]}")


def mmds_requires_token(res):
    code = _rep(res).get("mmds_notoken_code")
    return code == "401", f"GET / without a token -> {code} (MMDS V2 wants 401)"


def envd_version(res):
    rep = _rep(res)
    f, b = rep.get("envd_version_file"), rep.get("envd_version_bin")
    return bool(f) and f == (b or "").strip() and f == f.strip(), f"/etc/envd-version={f!r}, envd -version={b!r}"


def no_failed_units(res):
    rep = _rep(res)
    failed = rep.get("failed_units", "").split()
    logs = "".join(f"\n--- {k[len('journal_'):]} ---\n{v}" for k, v in rep.items() if k.startswith("journal_"))
    return "failed_units" in rep and not failed, f"failed units: {failed}{logs}"


def open_port_answers(res):
    net = res.get("net", {})
    key = next((k for k in net if k.endswith(":18080")), None)
    r = net.get(key or "", {})
    return (r.get("state") == "open" and "e2b-test-open-port" in r.get("reply", ""),
            f"unguarded {key}: {r} (net config by {_rep(res).get('net_config')})")


def _closed(port_suffix):
    def check(res):
        net = res.get("net", {})
        keys = [k for k in net if k.endswith(port_suffix)]
        bad = {k: net[k] for k in keys if net[k].get("state") == "open"}
        return bool(keys) and not bad, f"{ {k: net[k]['state'] for k in keys} }"
    return check


def ci_services(res):
    rep = _rep(res)
    return (rep.get("jupyter_status_code") == "200" and rep.get("ci_health_code") == "200",
            f"jupyter /api/status -> {rep.get('jupyter_status_code')}, :49999/health -> "
            f"{rep.get('ci_health_code')} {rep.get('ci_health_body', '')[:60]!r} ({rep.get('ci_wait_ms')} ms)")


def ci_exec(res):
    out = _rep(res).get("jupyter_exec", "")
    return "result=2" in out.splitlines(), f"1+1 through a kernel: {out[-300:]!r}"


def boot_times(res):
    rep = _rep(res)
    names = ["envd"] + (["jupyter", "ci"] if res["flavor"] == "e2b-ci" else [])
    got = {n: rep.get(f"ready_{n}_ms", "") for n in names}
    return all(v.isdigit() for v in got.values()), f"first answer, ms since kernel start: {got}"


COMMON = {
    "booted": booted,
    "guard_check": guard_check,
    "envd_health": envd_health,
    "sandbox_id": sandbox_id,
    "template_id": template_id,
    "mmds_flow": mmds_flow,
    "mmds_requires_token": mmds_requires_token,
    "envd_version": envd_version,
    "no_failed_units": no_failed_units,
    "boot_times": boot_times,
    "open_port_answers": open_port_answers,
    "host_cannot_reach_envd": _closed(":49983"),
    "host_cannot_reach_ci": _closed(":49999"),
    "host_cannot_reach_jupyter": _closed(":8888"),
    "host_cannot_reach_mmds": _closed("169.254.169.254:80"),
}
COMMON.update(vsock_checks.COMMON)
CI = {"ci_services": ci_services, "ci_exec": ci_exec, **vsock_checks.CI}


def checks_for(flavor: str) -> dict:
    return {**COMMON, **(CI if flavor == "e2b-ci" else {})}


def evaluate(res):
    for name, fn in checks_for(res["flavor"]).items():
        try:
            ok, detail = fn(res)
        except Exception as e:  # a malformed report is a failure, not a crash
            ok, detail = False, f"{type(e).__name__}: {e}"
        yield name, ok, detail


def timing_line(res) -> str:
    rep = _rep(res)
    parts = [f"flavor={res['flavor']}", f"accel={res.get('accel')}",
             f"kernel->envd-started={rep.get('envd_started_ms')} ms",
             f"kernel->envd-ready={rep.get('ready_envd_ms')} ms",
             f"(probe's warmup loop done at {rep.get('envd_ready_ms')} ms)"]
    if res["flavor"] == "e2b-ci":
        parts.append(f"kernel->jupyter-ready={rep.get('ready_jupyter_ms')} ms")
        parts.append(f"kernel->ci-services-ready={rep.get('ready_ci_ms')} ms")
    parts.append(f"host-wall={res.get('host_wall_s')} s")
    return "boot-times: " + " ".join(parts)
