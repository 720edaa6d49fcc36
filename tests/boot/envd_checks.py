"""What the boot must show of the real envd in our guests (issue 17), from
the probe's envd_* keys (section_envd_real in tests/boot/guest/probe.sh):
its files, its cgroups and where the processes it starts land, a quiet port
forwarder while idle, and /init with MMDS down leaving the guard whole.
Figures (RSS, idle CPU ticks) are reported, not judged: speed and memory
targets live in bench/. Merged into checks.py's tables."""
from __future__ import annotations

import re


def _rep(res):
    return res.get("report", {})


def run_files(res):
    """/run/e2b: the marker envd writes (0444, "true" in Firecracker mode is
    its content) and the ids from MMDS, all root's."""
    files = {}
    for line in _rep(res).get("envd_run_files", "").splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            files[parts[2]] = (parts[0], parts[1])
    want = {".E2B_SANDBOX": ("444", "root")}
    ok = all(files.get(k) == v for k, v in want.items()) and \
        {".E2B_SANDBOX_ID", ".E2B_TEMPLATE_ID"} <= set(files) and all(o == "root" for _, o in files.values())
    return ok, f"/run/e2b: {files}"


def cgroups(res):
    """envd made its three cgroups (-cgroup-root /sys/fs/cgroup, which it may
    write as root under Delegate=yes) and a process it starts lands in `user`."""
    rep = _rep(res)
    made = rep.get("envd_cgroups", "").split()
    child = rep.get("envd_child_cgroup", "").strip()
    return (made == ["ptys", "socats", "user"] and child == "0::/user",
            f"cgroups {made}, started process in {child!r}, envd in {rep.get('envd_own_cgroup', '').strip()!r}")


def forwarder_quiet(res):
    """Idle for 10 s: the port forwarder's socat cannot bind 169.254.0.21 (no
    such address here), and does not respawn or flood the journal."""
    rep = _rep(res)
    socats, lines = rep.get("envd_socats", ""), rep.get("envd_idle_journal_lines", "")
    ok = socats == "0" and lines.isdigit() and int(lines) <= 2
    return ok, (f"socat processes {socats}, envd journal lines in 10 s idle {lines}, children "
                f"{rep.get('envd_children')}, CPU ticks in 10 s {rep.get('envd_idle_cpu_ticks')}, "
                f"RSS {rep.get('envd_rss_kb')} kB")


def no_log_exporter(res):
    """The clone's document has no `address`, so envd's log exporter never
    starts: every TCP peer envd has is on the guest itself (loopback or the
    metadata alias on lo)."""
    peers = _rep(res).get("envd_peers", "").split()
    local = ("127.", "[::1]", "[::ffff:127.", "169.254.169.254:")
    return "envd_peers" in _rep(res) and all(p.startswith(local) for p in peers), f"envd's TCP peers: {peers}"


def init_without_mmds_keeps_guard(res):
    """/init (no token) while mmds-serve is stopped: envd pins its nat RETURN
    rules for 169.254.169.254:80 (iptables, the nft backend) and, with no
    token and no MMDS, allows it as a first setup; our inet e2b_guard table is
    untouched (envd-guard check reads the live ruleset back), and no token
    was left behind (GET /envs still open). The host's drop checks, later,
    run with those nat rules in place."""
    rep = _rep(res)
    nat = rep.get("envd_init_nat", "")
    pinned = all(re.search(rf"-A {chain} -d 169\.254\.169\.254/32 -p tcp -m tcp --dport 80 -j RETURN", nat)
                 for chain in ("PREROUTING", "OUTPUT"))
    ok = (rep.get("envd_init_no_mmds_code") == "204" and pinned and rep.get("guard_check_after_init_rc") == "0"
          and rep.get("envd_envs_after_init") == "200")
    return ok, (f"/init -> {rep.get('envd_init_no_mmds_code')} in {rep.get('envd_init_no_mmds_ms')} ms; nat rules "
                f"pinned: {pinned}; envd-guard check rc {rep.get('guard_check_after_init_rc')}; GET /envs -> "
                f"{rep.get('envd_envs_after_init')}")


def priorities(res):
    """envd runs at nice -20 (units/envd.service, as E2B's unit), and puts what
    it starts back at 0."""
    rep = _rep(res)
    return (rep.get("envd_nice") == "-20" and rep.get("envd_child_nice") == "0",
            f"envd nice {rep.get('envd_nice')!r}, a process it started: {rep.get('envd_child_nice')!r}")


COMMON = {
    "envd_run_files": run_files,
    "envd_cgroups": cgroups,
    "envd_priorities": priorities,
    "envd_forwarder_quiet": forwarder_quiet,
    "envd_no_log_exporter": no_log_exporter,
    "envd_init_without_mmds_keeps_guard": init_without_mmds_keeps_guard,
}
