"""What the boot must show for the vsock relays (issue 13), from the probe's
vsock_* keys (tests/boot/guest/vsock.sh). Merged into checks.py's tables."""
from __future__ import annotations

import json

RSS_LIMIT_KB = 2048  # every relay process at most 2 MiB
# The dynamic relay's one refusal line, whatever the reason (relay/relay.h),
# without its newline: the shell's $(…) drops it.
ERR_LINE = "ERR not relayed (the guest's journal says why)"


def _rep(res):
    return res.get("report", {})


def modules(res):
    got = set(_rep(res).get("vsock_modules", "").split())
    return {"vsock", "vsock_loopback"} <= got, f"loaded: {sorted(got)}"


def units_enabled_active(res):
    states = dict(kv.split("=", 1) for kv in _rep(res).get("vsock_units", "").split() if "=" in kv)
    want = ["vsock-relay.socket", "vsock-proxy@49983.socket", "mmds-vsock.socket"] + (
        ["vsock-proxy@49999.socket"] if res["flavor"] == "e2b-ci" else [])
    return bool(states) and all(states.get(u) == "enabled/active" for u in want), f"{states}"


def envd_wait(res):
    rep = _rep(res)
    return rep.get("vsock_wait_rc") == "0" and "port 49983: /health 204" in rep.get("vsock_wait_out", ""), \
        f"e2b-hostlink --cid 1 wait: rc={rep.get('vsock_wait_rc')} {rep.get('vsock_wait_out', '')[:300]!r}"


def forward_envd(res):
    code = _rep(res).get("vsock_forward_envd_code")
    return code == "204", f"curl through e2b-hostlink forward 49983 (AF_VSOCK, CID 1) -> {code}"


def dynamic_relay(res):
    rep = _rep(res)
    body, raw = rep.get("vsock_dynamic_body", ""), rep.get("vsock_dynamic_raw", "")
    return ("e2b-test-open-port" in body and raw.startswith("OK\n") and "e2b-test-open-port" in raw,
            f"forward 18080 -> {body[:80]!r}; raw CONNECT 18080 -> {raw[:120]!r}")


def refuses_8888(res):
    rep = _rep(res)
    raw, fwd = rep.get("vsock_refuse_8888", ""), rep.get("vsock_forward_8888", "")
    # One line: the shell's $(…) has already dropped its newline.
    return (raw == ERR_LINE and "\n" not in raw
            and "refused by the relay" in fwd and "curl=0" not in fwd,
            f"raw: {raw!r}; forward: {fwd[-300:]!r}")


def refuses_malformed(res):
    raw = _rep(res).get("vsock_refuse_malformed", "")
    return raw == ERR_LINE and "\n" not in raw, f"{raw!r}"


def relay_rss(res):
    pairs = dict(kv.split("=", 1) for kv in _rep(res).get("vsock_rss", "").split() if "=" in kv)
    bad = {k: v for k, v in pairs.items() if not v.isdigit() or int(v) > RSS_LIMIT_KB}
    return bool(pairs) and not bad, f"VmRSS kB: {pairs} (limit {RSS_LIMIT_KB})"


def ci_relay(res):
    rep = _rep(res)
    health, contexts = rep.get("vsock_ci_health", ""), rep.get("vsock_ci_contexts", "")
    results = []
    for line in rep.get("vsock_ci_execute", "").splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            pass
    two = any(r.get("type") == "result" and r.get("text") == "2" for r in results)
    return ('"OK"' in health and '"python"' in contexts and two,
            f"through vsock 49999: /health -> {health[:60]!r}, /contexts -> {contexts[:120]!r}, "
            f"/execute 1+1 -> {rep.get('vsock_ci_execute', '')[:200]!r}")


def _doc(text):
    import json
    try:
        return json.loads(text)
    except ValueError:
        return None


def mmds_default_refused(res):
    rep = _rep(res)
    out, journal = rep.get("vsock_mmds_default_out", ""), rep.get("vsock_mmds_default_journal", "")
    return (rep.get("vsock_mmds_default_rc") == "1" and "cid 1 port 10052" in out
            and "peer CID 1 refused" in journal,
            f"default policy, from CID 1: rc={rep.get('vsock_mmds_default_rc')} {out[:200]!r}; journal {journal[:200]!r}")


def mmds_set_over_vsock(res):
    rep = _rep(res)
    got = _doc(rep.get("vsock_mmds_get", ""))
    return (rep.get("vsock_mmds_put_rc") == "0" and got is not None and got.get("instanceID") == "isb-vsock-set",
            f"test drop-in admits CID 1: put rc={rep.get('vsock_mmds_put_rc')} "
            f"{rep.get('vsock_mmds_put_out', '')[:200]!r}; get -> {rep.get('vsock_mmds_get', '')[:200]!r}")


def init_uses_vsock_document(res):
    rep = _rep(res)
    wrong, right = rep.get("vsock_init_wrong_code"), rep.get("vsock_init_right_code")
    return wrong == "401" and right == "204", \
        f"envd /init with a wrong token -> {wrong}, with the token hashing to the vsock-set accessTokenHash -> {right}"


def mmds_survives_restart(res):
    rep = _rep(res)
    got = _doc(rep.get("vsock_mmds_after_restart", ""))
    return (got is not None and got.get("instanceID") == "isb-vsock-set",
            f"after systemctl restart mmds.service ({rep.get('vsock_mmds_restarted')}): "
            f"GET / -> {rep.get('vsock_mmds_after_restart', '')[:200]!r}")


COMMON = {
    "vsock_modules": modules,
    "vsock_units": units_enabled_active,
    "vsock_envd_wait": envd_wait,
    "vsock_forward_envd": forward_envd,
    "vsock_dynamic_relay": dynamic_relay,
    "vsock_refuses_8888": refuses_8888,
    "vsock_refuses_malformed": refuses_malformed,
    "vsock_relay_rss": relay_rss,
    "vsock_mmds_default_refused": mmds_default_refused,
    "vsock_mmds_set_over_vsock": mmds_set_over_vsock,
    "vsock_init_uses_vsock_document": init_uses_vsock_document,
    "vsock_mmds_survives_restart": mmds_survives_restart,
}
def refuses_kernel_ports(res):
    """The default context's kernel listens on its ZMQ channels' ports of
    127.0.0.1 (ephemeral, at least five); the dynamic relay refuses every one
    with its one ERR line."""
    rep = _rep(res)
    ports = [p for p in rep.get("vsock_kernel_ports", "").split(",") if p]
    answers = dict(a.split("=", 1) for a in rep.get("vsock_kernel_answers", "").split("|") if "=" in a)
    ok = len(ports) >= 5 and all(answers.get(p, "").strip() == ERR_LINE for p in ports)
    return ok, f"kernel ports {ports}: {answers}"


CI = {"vsock_ci_relay": ci_relay, "vsock_refuses_kernel_ports": refuses_kernel_ports}
