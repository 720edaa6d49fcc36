"""What a booted guest must show (shared by tests/boot/test_boot.py and vm.py).

Each check takes the result of vm.boot() and returns (ok, detail). The probe
only reports facts; every expectation lives here.
"""
from __future__ import annotations

import json

import envd_checks
import testimages
import sdk_checks
import vsock_checks

from vm import ALL_VARIANTS, GUARDED, METADATA_ADDR, OPEN_PORT, ROOT, Variant

WARMUP_TRIES = 200  # the pool warmup: 200 x 50 ms (ci/templates.py uses the same)


def _rep(res):
    return res.get("report", {})


def report_intact(res):
    """Every line the probe sent decoded; a value cut or garbled on the way
    is left out of the report, and this names it."""
    bad = _rep(res).get("undecodable", "")
    return not bad, f"undecodable probe values: {bad}" if bad else "every probe value decoded"


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


# A oneshot probe is "activating" while it runs; every other service must have
# settled: not failed, never restarted, not stuck starting.
SELF = {"e2b-test-probe.service"}


def unit_table(text: str) -> dict:
    """The probe's unit_states lines -> {unit: {property: value}}."""
    table = {}
    for line in text.splitlines():
        props = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "Id" in props:
            table[props["Id"]] = props
    return table


# Work that belongs to the build (os-image/mkosi.finalize does it and stamps
# /etc/.updated and /var/.updated): none of it may run on a clone's boot.
BUILD_TIME_UNITS = ("systemd-hwdb-update.service", "ldconfig.service", "systemd-journal-catalog-update.service",
                    "systemd-update-done.service", "systemd-sysusers.service")


def _ran(props: dict) -> bool:
    return int(props.get("ActiveEnterTimestampMonotonic") or 0) > 0


def no_build_time_units(res):
    services = unit_table(_rep(res).get("services", ""))
    ran = [u for u in BUILD_TIME_UNITS if _ran(services.get(u, {}))]
    return bool(services) and not ran, f"ran on boot: {ran}"


# What the image masks (os-image/README.md, "A lean boot"): links to /dev/null
# in the image's /etc/systemd/system; a masked template masks its instances.
def no_masked_units(res):
    """No unit the image masks ran, nor an instance of a masked template."""
    units = unit_table(_rep(res).get("unit_times", ""))
    masked = testimages.masked()

    def is_masked(unit: str) -> bool:
        name, _, kind = unit.rpartition(".")
        template = name.split("@", 1)[0] + "@." + kind if "@" in name else None
        return unit in masked or template in masked

    # A oneshot without RemainAfterExit never enters "active": that it left
    # "inactive" (InactiveExitTimestamp) is what says it ran.
    ran = [u for u, p in units.items() if is_masked(u)
           and (_ran(p) or int(p.get("InactiveExitTimestampMonotonic") or 0) > 0)]
    return bool(units) and bool(masked) and not ran, f"masked: {masked}; ran: {ran}"


def skipped_without_work(res):
    """What the image keeps from starting when it has nothing to do:
    systemd-remount-fs (its drop-in's conditions: no /etc/fstab, a rw root)
    never left "inactive", and udev ran no dmi_memory_id (70-memory.rules is
    masked), so the DMI device has no MEMORY_DEVICE_* properties."""
    rep = _rep(res)
    units = unit_table(rep.get("unit_times", ""))
    remount = units.get("systemd-remount-fs.service")
    started = remount is None or int(remount.get("InactiveExitTimestampMonotonic") or 0) > 0
    memory = rep.get("udev_memory_properties", "")
    return (not started and memory == "0",
            f"systemd-remount-fs: {'not reported' if remount is None else 'started' if started else 'not started'}; "
            f"MEMORY_DEVICE_* properties in udev's database: {memory!r}")


# A client of logind that starts it through D-Bus: an activation under TCG
# takes a second or two; D-Bus gives up after 25 s.
LOGIND_ACTIVATION_MS = 10000


def logind_on_demand(res):
    """systemd-logind is not part of the boot: it ran by the time the boot
    settled only where udev found a power button (Variant.power_button),
    and a client (loginctl) gets an answer either way, D-Bus starting logind
    for it in good time."""
    rep = _rep(res)
    logind = unit_table(rep.get("services", "")).get("systemd-logind.service", {})
    started = _ran(logind)
    rc, ms = rep.get("logind_ask_rc", ""), int(rep.get("logind_ask_ms") or -1)
    # A template's boot is not one of ALL_VARIANTS; vm.boot records the button.
    want_up = res["power_button"] if "power_button" in res else variant_of(res).power_button
    # Not in the list at all: never loaded, so never started.
    ok = bool(rep.get("services")) and started == want_up and rc == "0" and 0 <= ms < LOGIND_ACTIVATION_MS
    return ok, (f"systemd-logind {'ran' if started else 'did not run'} at boot "
                f"({'a power button' if want_up else 'no power button'}); "
                f"loginctl list-sessions: rc={rc or '?'} after {ms} ms: {rep.get('logind_ask_out', '')[:200]!r}")


def power_button_powers_off(res):
    """The VMM's power button (QMP system_powerdown) powers the guest off:
    QEMU reports the guest's own shutdown and exits."""
    pd = res.get("powerdown") or {}
    return (pd.get("reason") == "guest-shutdown" and pd.get("exited") is True,
            f"SHUTDOWN reason {pd.get('reason')!r}, QEMU exited: {pd.get('exited')}, "
            f"{pd.get('seconds')} s after the press{'; ' + pd['error'] if pd.get('error') else ''}")


def critical_path_weighted(res):
    """The cpu controller is on (envd's Delegate=), so between services only
    weights count: the guard and the MMDS document's one-shot run at 1000,
    mmds at 1000 during the boot, envd at the default (its port scanner)."""
    rep = _rep(res)
    units = unit_table(rep.get("cpu_weights", ""))
    unset = "[not_set]"  # systemctl's "[not set]", its space made "_" by the probe's unit_states
    want = {"envd-guard.service": ("1000", unset), "mmds-fwcfg.service": ("1000", unset),
            "mmds.service": (unset, "1000"), "envd.service": (unset, unset)}
    got = {u: (p.get("CPUWeight"), p.get("StartupCPUWeight")) for u, p in units.items()}
    return ("cpu" in rep.get("cgroup_controllers", "").split() and got == want,
            f"(CPUWeight, StartupCPUWeight): {got}; controllers {rep.get('cgroup_controllers')!r}")


def way_in_early(res):
    """MMDS and the vsock relays (the host's way in) are not ordered after
    systemd-tmpfiles-setup.service, which waits for journald: PrivateTmp=
    would add that order, TemporaryFileSystem= does not."""
    lines = dict(l.split(": ", 1) for l in _rep(res).get("way_in_after", "").splitlines() if ": " in l)
    late = [u for u, after in lines.items() if "systemd-tmpfiles-setup.service" in after.split()]
    return len(lines) == 4 and not late, f"after systemd-tmpfiles-setup: {late}; reported: {sorted(lines)}"


def logins_open(res):
    """No /run/nologin: its remover, systemd-user-sessions, is masked, and so is its maker."""
    return _rep(res).get("run_nologin") == "absent", f"/run/nologin {_rep(res).get('run_nologin')}"


def no_console_logins(res):
    """The gettys start only with `e2b.console` on the kernel command line."""
    services = unit_table(_rep(res).get("services", ""))
    ran = [u for u, p in services.items() if u.startswith(("getty@", "serial-getty@")) and _ran(p)]
    return bool(services) and not ran, f"gettys that ran: {ran}"


def udev_coldplug(res):
    """The image's narrower coldplug (systemd-udev-trigger.service.d/
    10-e2b-coldplug.conf) still gets the devices a sandbox uses into udev's
    database (the root disk, eth0, the serial console) and their rules'
    owners and modes; the virtual consoles it leaves out keep devtmpfs'
    root-only nodes."""
    rep = _rep(res)
    done = {tuple(l.split()[1:3]) for l in rep.get("udev_initialized", "").splitlines() if l.startswith("1 ")}
    missing = [d for d in (("block", "vda"), ("net", "eth0"), ("tty", "ttyS0")) if d not in done]
    nodes = dict(l.split(" ", 1) for l in rep.get("dev_nodes", "").splitlines() if " " in l)
    want = {"/dev/ttyS0": "root:dialout 660", "/dev/tty5": "root:root 600", "/dev/vcs1": "root:root 600",
            "/dev/ptmx": "root:tty 666", "/dev/tty": "root:tty 666", "/dev/null": "root:root 666"}
    wrong = {n: nodes.get(n) for n, w in want.items() if nodes.get(n) != w}
    return (not missing and not wrong,
            f"not in udev's database: {missing}; owner and mode unlike {want}: {wrong}; {len(done)} devices initialized")


def boot_figures(res):
    """The figures bench/boot.sh compares (reported, not judged): userspace
    start, settling, readiness, the guest's busy CPU."""
    rep = _rep(res)
    keys = ("userspace_start_us", "settled_ms", "cpu_busy_ticks")
    ok = all((rep.get(k) or "").isdigit() for k in keys)
    ready = {n: rep.get(f"ready_{n}_ms") for n in ("envd", "jupyter", "ci") if rep.get(f"ready_{n}_ms")}
    return ok, f"{ {k: rep.get(k) for k in keys} } ready (ms since kernel start): {ready}"


def no_failed_units(res):
    rep = _rep(res)
    failed = rep.get("failed_units", "").split()
    services = unit_table(rep.get("services", ""))
    restarted = {u: p["NRestarts"] for u, p in services.items()
                 if p.get("NRestarts", "0") not in ("0", "")}
    stuck = {u: f"{p['ActiveState']}/{p.get('SubState')}" for u, p in services.items()
             if p.get("ActiveState") in ("activating", "deactivating", "reloading") and u not in SELF}
    pending = rep.get("pending_jobs", "").split()
    logs = "".join(f"\n--- {k[len('journal_'):]} ---\n{v}" for k, v in rep.items() if k.startswith("journal_"))
    ok = "failed_units" in rep and bool(services) and not (failed or restarted or stuck or pending)
    return ok, (f"{len(services)} services; failed: {failed}, restarted (NRestarts): {restarted}, "
                f"stuck: {stuck}, jobs left: {pending}{logs}")


def network_by_image(res):
    """The guest's eth0 address came from the image (ip= on the kernel command
    line through systemd), not from the probe's fallback."""
    rep = _rep(res)
    return rep.get("net_config") == "cmdline", f"net config by {rep.get('net_config')}: {rep.get('net_addr', '')[:120]!r}"


def open_port_answers(res):
    net = res.get("net", {})
    key = next((k for k in net if k.endswith(":18080")), None)
    r = net.get(key or "", {})
    return (r.get("state") == "open" and "e2b-test-open-port" in r.get("reply", ""),
            f"unguarded {key}: {r} (net config by {_rep(res).get('net_config')})")


# ------------------------------------------------------------ listeners ---

WILDCARDS = {"0.0.0.0", "*", "[::]", "::"}


def parse_listeners(text: str) -> list[tuple[str, str, int]]:
    """The probe's "proto address:port" lines -> (proto, address, port)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2 or ":" not in parts[1]:
            continue
        addr, port = parts[1].rsplit(":", 1)
        out.append((parts[0], addr.split("%", 1)[0], int(port)))
    return out


def _covers(listener, target: str) -> bool:
    proto, addr, port = listener
    t_addr, t_port = target.rsplit(":", 1)
    return proto == "tcp" and port == int(t_port) and (addr in WILDCARDS or addr == t_addr)


def _loopback(addr: str) -> bool:
    return addr.startswith("127.") or addr in ("[::1]", "::1")


def allowed_listeners(res) -> list:
    """What may listen besides loopback: envd on every address (it cannot be
    told otherwise; guarded), mmds.socket on the alias (on lo; guarded), and
    the test's own listeners (the unguarded control port, the drop-check
    listeners the probe started, and its e2b-hostlink forwards for the SDKs)."""
    allowed = [("tcp", w, 49983) for w in WILDCARDS] + [("tcp", METADATA_ADDR, 80)]
    allowed += [("tcp", w, OPEN_PORT) for w in WILDCARDS]
    specs = _rep(res).get("test_listeners", "").split(",") + _rep(res).get("sdk_forwards", "").split(",")
    for spec in filter(None, specs):
        addr, port = spec.rsplit(":", 1)
        allowed.append(("tcp", addr, int(port)))
    return allowed


def listeners_allowed(res):
    found = parse_listeners(_rep(res).get("listeners", ""))
    allowed = allowed_listeners(res)
    bad = [f"{p} {a}:{n}" for p, a, n in found if not _loopback(a) and (p, a, n) not in allowed]
    return bool(found) and not bad, (f"not allowed: {bad}; all: {[f'{p} {a}:{n}' for p, a, n in found]}; "
                                     f"test listeners: {_rep(res).get('test_listeners')!r}")


def _dropped(target):
    """From the host, TARGET (address:port) must time out: dropped. A refusal
    means the packet got through to a closed port; an answer, to a listener.
    Something must listen on TARGET (the image's service or the probe's test
    listener), so the time-out measures the drop and not a missing address;
    and for the MMDS alias, which mmds.socket binds with FreeBind, the alias
    must be on lo, or the packet dies for want of the address."""
    addr = target.rsplit(":", 1)[0]

    def check(res):
        r = res.get("net", {}).get(target, {})
        listening = [l for l in parse_listeners(_rep(res).get("listeners", "")) if _covers(l, target)]
        present = addr != METADATA_ADDR or f" {addr}/32 " in _rep(res).get("lo_addr", "")
        return (r.get("state") == "timeout" and bool(listening) and present,
                f"host -> {target}: {r.get('state')}; listening in the guest: {listening}"
                + ("" if present else f"; {addr} is not on lo: {_rep(res).get('lo_addr', '')[:200]!r}"))
    return check


def guard_stop_keeps_rules(res):
    """After `systemctl stop envd-guard` the rules stay (the unit has no
    ExecStop), and what Requires= the guard stopped with it."""
    rep = _rep(res)
    units = unit_table(rep.get("after_guard_stop", ""))
    guard = units.get("envd-guard.service", {}).get("ActiveState")
    envd = units.get("envd.service", {}).get("ActiveState")
    return (guard == "inactive" and envd == "inactive" and rep.get("guard_check_after_stop_rc") == "0",
            f"after stop: envd-guard {guard}, envd {envd}; envd-guard check rc="
            f"{rep.get('guard_check_after_stop_rc')} {rep.get('guard_check_after_stop_out', '')[:200]!r}")


# ----------------------------------------------------------- fail closed ---

GUARDED_UNITS = ["envd.service", "mmds.service", "mmds.socket", "jupyter.service", "code-interpreter.service"]


def guard_failed(res):
    units = unit_table(_rep(res).get("guarded_units", ""))
    g = units.get("envd-guard.service", {})
    return (g.get("ActiveState") == "failed",
            f"envd-guard: {g}; journal: {_rep(res).get('guard_journal', '')[-300:]!r}")


def guarded_never_active(res):
    """Not one of the units that Require= the guard ever reached active
    (ActiveEnterTimestampMonotonic stays 0)."""
    units = unit_table(_rep(res).get("guarded_units", ""))
    missing = [u for u in GUARDED_UNITS if u not in units]
    entered = {u: p for u, p in units.items() if u in GUARDED_UNITS
               and (p.get("ActiveEnterTimestampMonotonic") != "0" or p.get("ActiveState") == "active")}
    return (not missing and not entered,
            f"reached active: {entered}; not reported: {missing}; states: "
            f"{ {u: p.get('ActiveState') + '/' + p.get('Result', '') for u, p in units.items()} }")


def warmup_fails(res):
    rep = _rep(res)
    code, tries = rep.get("envd_health_code"), rep.get("envd_health_tries")
    return (code != "204" and tries == str(WARMUP_TRIES),
            f"pool warmup: GET /health -> {code} after {tries} of {WARMUP_TRIES} tries")


def nothing_listens_guarded(res):
    """Not on any address: no guarded port, and not the MMDS alias."""
    found = parse_listeners(_rep(res).get("listeners", ""))
    ports = {int(t.rsplit(":", 1)[1]) for t in GUARDED if not t.startswith(METADATA_ADDR + ":")}
    bad = [f"{p} {a}:{n}" for p, a, n in found if n in ports or a == METADATA_ADDR]
    return "listeners" in _rep(res) and not bad, f"listening on a guarded port: {bad}"


def ci_services(res):
    rep = _rep(res)
    return (rep.get("jupyter_status_code") == "200" and rep.get("ci_health_code") == "200",
            f"jupyter /api/status -> {rep.get('jupyter_status_code')}, :49999/health -> "
            f"{rep.get('ci_health_code')} {rep.get('ci_health_body', '')[:60]!r} ({rep.get('ci_wait_ms')} ms)")


def ci_execute(res):
    """1+1 through the API server: POST /execute streams JSON lines, one of
    them the result {"type": "result", "text": "2", ...}."""
    body = _rep(res).get("ci_execute", "")
    results = []
    for line in body.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and item.get("type") == "result":
            results.append(item.get("text"))
    return results == ["2"], f"POST :49999/execute 1+1 -> results {results}; body tail {body[-300:]!r}"


def ci_first_start(res):
    """:49999 came up on the API server's first start: no restart of it or of
    Jupyter (a failed default context restarts the unit), the default
    contexts' kernels in Jupyter and no more, and how much memory is left."""
    rep = _rep(res)
    units = unit_table(rep.get("services", ""))
    restarts = {u: units.get(u, {}).get("NRestarts") for u in ("jupyter.service", "code-interpreter.service")}
    try:
        names = sorted(k.get("name") for k in json.loads(rep.get("jupyter_kernels", "")))
        kernels = len(names)
    except (ValueError, AttributeError, TypeError):
        names, kernels = None, None
    # The default contexts: python's, and javascript's where the image has its kernel.
    return (rep.get("ci_health_code") == "200" and all(v == "0" for v in restarts.values())
            and names in (["python3"], ["javascript", "python3"]),
            f"NRestarts {restarts}, kernels in Jupyter: {kernels}, MemAvailable "
            f"{rep.get('mem_available_kb')} kB, :49999 ready at {rep.get('ready_ci_ms')} ms "
            f"({res.get('cpus')} vCPU, {res.get('mem_mib')} MiB)")


def boot_times(res):
    rep = _rep(res)
    names = ["envd"] + (["jupyter", "ci"] if res["flavor"] == "e2b-ci" else [])
    got = {n: rep.get(f"ready_{n}_ms", "") for n in names}
    return all(v.isdigit() for v in got.values()), f"first answer, ms since kernel start: {got}"


def _dropped_checks() -> dict:
    names = {49983: "envd", 49999: "ci", 8888: "jupyter", 80: "mmds"}
    return {f"host_drops_{names[int(t.rsplit(':', 1)[1])]}": _dropped(t) for t in GUARDED}


COMMON = {
    "booted": booted,
    "report_intact": report_intact,
    "guard_check": guard_check,
    "envd_health": envd_health,
    "sandbox_id": sandbox_id,
    "template_id": template_id,
    "mmds_flow": mmds_flow,
    "mmds_requires_token": mmds_requires_token,
    "envd_version": envd_version,
    "no_failed_units": no_failed_units,
    "no_build_time_units": no_build_time_units,
    "no_console_logins": no_console_logins,
    "no_masked_units": no_masked_units,
    "udev_coldplug": udev_coldplug,
    "skipped_without_work": skipped_without_work,
    "logind_on_demand": logind_on_demand,
    "critical_path_weighted": critical_path_weighted,
    "logins_open": logins_open,
    "way_in_early": way_in_early,
    "boot_figures": boot_figures,
    "boot_times": boot_times,
    "network_by_image": network_by_image,
    "open_port_answers": open_port_answers,
    **_dropped_checks(),
    "listeners_allowed": listeners_allowed,
}
STOP_GUARD = {"guard_stop_keeps_rules": guard_stop_keeps_rules}
CI = {"ci_services": ci_services, "ci_execute": ci_execute, "ci_first_start": ci_first_start}
FAIL_CLOSED = {
    "booted": booted,
    "report_intact": report_intact,
    "guard_failed": guard_failed,
    "guarded_never_active": guarded_never_active,
    "warmup_fails": warmup_fails,
    "nothing_listens_guarded": nothing_listens_guarded,
    "logind_on_demand": logind_on_demand,
}
POWER_BUTTON = {"power_button_powers_off": power_button_powers_off}
COMMON.update(vsock_checks.COMMON)
COMMON.update(envd_checks.COMMON)
CI.update(vsock_checks.CI)


def sdk_for(v: Variant) -> dict:
    """The SDK checks of V's boot: none without sdk; with sdk_probes, only
    those probes' (the boot runs no other), else every probe's."""
    if not v.sdk:
        return {}
    if not v.sdk_probes:
        return sdk_checks.SDK
    return {name: fn for name, fn in sdk_checks.SDK.items()
            if name == "sdk_start_state" or any(name.startswith(f"sdk_{p}_") for p in v.sdk_probes)}


def checks_for(v: Variant) -> dict:
    power = POWER_BUTTON if v.power_button else {}
    if v.mode == "guard-fails":
        return {**FAIL_CLOSED, **power}
    return {**COMMON, **(STOP_GUARD if v.stop_guard else {}), **(CI if v.flavor == "e2b-ci" else {}),
            **sdk_for(v), **power}


def variant_of(res) -> Variant:
    return next(v for v in ALL_VARIANTS if v.id == res["boot"])


def evaluate(res):
    for name, fn in checks_for(variant_of(res)).items():
        try:
            ok, detail = fn(res)
        except Exception as e:  # a malformed report is a failure, not a crash
            ok, detail = False, f"{type(e).__name__}: {e}"
        yield name, ok, detail


def timing_line(res) -> str:
    rep = _rep(res)
    parts = [f"boot={res.get('boot')}", f"accel={res.get('accel')}", f"size={res.get('cpus')}x{res.get('mem_mib')}MiB",
             f"kernel->envd-started={rep.get('envd_started_ms')} ms",
             f"kernel->envd-ready={rep.get('ready_envd_ms')} ms",
             f"(probe's warmup loop done at {rep.get('envd_ready_ms')} ms)"]
    if res["flavor"] == "e2b-ci":
        parts.append(f"kernel->jupyter-ready={rep.get('ready_jupyter_ms')} ms")
        parts.append(f"kernel->ci-services-ready={rep.get('ready_ci_ms')} ms")
    parts.append(f"host-wall={res.get('host_wall_s')} s")
    return "boot-times: " + " ".join(parts)
