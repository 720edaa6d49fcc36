"""The boot checks' verdicts on hand-made probe reports (no boot): each
new check must fail on exactly the report a broken image gives. The real
boots are in test_boot.py."""
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import checks  # noqa: E402
import vm  # noqa: E402

G = vm.GUEST_ADDR
M = vm.METADATA_ADDR


def good_report(**over):
    rep = {
        "done": "1",
        "net_config": "cmdline",
        "lo_addr": f"1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n"
                   f"1: lo    inet {M}/32 scope host lo\\       valid_lft forever preferred_lft forever",
        "test_listeners": f"{G}:49999,{G}:8888",
        "listeners": "\n".join([
            "tcp *:49983", f"tcp {M}:80", "tcp 0.0.0.0:18080", f"tcp {G}:49999", f"tcp {G}:8888",
            "tcp 127.0.0.1:8888", "tcp 127.0.0.1:49999", "udp 127.0.0.53%lo:53"]),
        "failed_units": "",
        "pending_jobs": "",
        "services": "\n".join([
            "Id=envd.service ActiveState=active SubState=running NRestarts=0 Result=success",
            "Id=code-interpreter.service ActiveState=active SubState=running NRestarts=0 Result=success",
            "Id=jupyter.service ActiveState=active SubState=running NRestarts=0 Result=success",
            "Id=e2b-test-probe.service ActiveState=activating SubState=start NRestarts=0 Result=success"]),
    }
    rep.update(over)
    return rep


def result(rep=None, net=None, boot="e2b-ci"):
    targets = vm.GUARDED
    return {"flavor": boot.split("-")[0] + "-" + boot.split("-")[1], "boot": boot,
            "report": rep if rep is not None else good_report(),
            "net": net if net is not None else {**{t: {"state": "timeout"} for t in targets},
                                                f"{G}:18080": {"state": "open", "reply": "e2b-test-open-port"}}}


def verdict(name, res):
    return checks.checks_for(checks.variant_of(res))[name](res)[0]


def test_good_report_passes_the_new_checks():
    res = result()
    for name in ["no_failed_units", "network_by_image", "listeners_allowed", "open_port_answers",
                 "host_drops_envd", "host_drops_ci", "host_drops_jupyter", "host_drops_mmds"]:
        assert verdict(name, res), (name, checks.checks_for(checks.variant_of(res))[name](res)[1])


def test_refused_or_open_is_not_dropped():
    for state in ("refused", "open", "error"):
        net = result()["net"]
        net[f"{G}:49999"] = {"state": state}
        assert not verdict("host_drops_ci", result(net=net)), state


def test_mmds_timeout_without_the_alias_on_lo_is_not_a_drop():
    """The broken-open boot (guard off) timed out on the alias only because
    nothing had put the address on lo; that is no proof of a drop."""
    rep = good_report(lo_addr="1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever")
    assert not verdict("host_drops_mmds", result(rep))
    assert verdict("host_drops_mmds", result())


def test_timeout_without_a_listener_is_not_a_drop():
    rep = good_report(listeners="tcp *:49983\ntcp 0.0.0.0:18080", test_listeners="")
    assert not verdict("host_drops_jupyter", result(rep))
    assert not verdict("host_drops_mmds", result(rep))


def test_api_server_on_every_address_is_not_allowed():
    rep = good_report(listeners=good_report()["listeners"] + "\ntcp 0.0.0.0:49999",
                      test_listeners=f"{G}:8888")
    assert not verdict("listeners_allowed", result(rep))


def test_probe_network_fallback_fails():
    assert not verdict("network_by_image", result(good_report(net_config="probe")))


def test_crash_loop_fails_no_failed_units():
    looping = good_report(services=good_report()["services"].replace(
        "Id=code-interpreter.service ActiveState=active SubState=running NRestarts=0",
        "Id=code-interpreter.service ActiveState=active SubState=running NRestarts=2"))
    assert not verdict("no_failed_units", result(looping))
    stuck = good_report(services=good_report()["services"].replace(
        "Id=jupyter.service ActiveState=active SubState=running",
        "Id=jupyter.service ActiveState=activating SubState=auto-restart"))
    assert not verdict("no_failed_units", result(stuck))


def test_fail_closed_checks():
    ok = {"done": "1", "envd_health_code": "000", "envd_health_tries": "200",
          "listeners": "tcp 0.0.0.0:18080",
          "guarded_units": "\n".join(
              ["Id=envd-guard.service ActiveState=failed SubState=failed NRestarts=0 Result=exit-code "
               "ActiveEnterTimestampMonotonic=0"] +
              [f"Id={u} ActiveState=inactive SubState=dead NRestarts=0 Result=success "
               "ActiveEnterTimestampMonotonic=0" for u in checks.GUARDED_UNITS])}
    res = result(ok, boot="e2b-ci-guard-fails")
    for name in ["guard_failed", "guarded_never_active", "warmup_fails", "nothing_listens_guarded"]:
        assert verdict(name, res), name
    started = dict(ok, guarded_units=ok["guarded_units"].replace(
        "Id=envd.service ActiveState=inactive SubState=dead NRestarts=0 Result=success ActiveEnterTimestampMonotonic=0",
        "Id=envd.service ActiveState=inactive SubState=dead NRestarts=0 Result=success "
        "ActiveEnterTimestampMonotonic=5000000"))
    assert not verdict("guarded_never_active", result(started, boot="e2b-ci-guard-fails"))
    assert not verdict("warmup_fails", result(dict(ok, envd_health_code="204", envd_health_tries="3"),
                                              boot="e2b-ci-guard-fails"))
    assert not verdict("nothing_listens_guarded", result(dict(ok, listeners="tcp *:49983"),
                                                         boot="e2b-ci-guard-fails"))


def test_report_read_mid_line_keeps_only_complete_lines():
    """The host polls the serial log while the guest writes it: a *_b64
    line cut mid-value is not a report line yet, and is not an error."""
    listeners = vm.base64.b64encode(b"tcp *:49983\ntcp 0.0.0.0:18080").decode()
    text = f"E2B-PROBE flavor=e2b-rt\r\nE2B-PROBE listeners_b64={listeners}\r\nE2B-PROBE done=1"
    for cut in range(len(text) + 1):
        rep = vm.parse_report(text[:cut])
        assert "undecodable" not in rep, cut
        assert "done" not in rep
    rep = vm.parse_report(text + "\r\n")
    assert rep["done"] == "1" and rep["listeners"] == "tcp *:49983\ntcp 0.0.0.0:18080"


def test_undecodable_value_fails_its_readers_and_report_intact():
    """A value garbled on a complete line (a character lost) is left out,
    so nothing_listens_guarded cannot pass on it, and report_intact names it."""
    listeners = vm.base64.b64encode(b"tcp *:49983").decode()
    garbled = listeners[:5] + listeners[6:]
    rep = vm.parse_report(f"E2B-PROBE listeners_b64={garbled}\nE2B-PROBE done=1\n")
    assert "listeners" not in rep and rep["undecodable"] == "listeners"
    res = result(dict(rep, envd_health_code="000", envd_health_tries="200"), boot="e2b-ci-guard-fails")
    assert not verdict("nothing_listens_guarded", res)
    assert not verdict("report_intact", res)
    assert verdict("report_intact", result())
    # A later, good copy of the key does not hide the bad one.
    rep = vm.parse_report(f"E2B-PROBE listeners_b64={listeners}\nE2B-PROBE listeners_b64=%%%\n")
    assert "listeners" not in rep and rep["undecodable"] == "listeners"


def test_broken_variants_are_by_hand_and_judged_by_the_normal_checks():
    v = vm.variant("e2b-ci", "broken-open")
    assert v not in vm.VARIANTS  # make test never boots it
    assert checks.checks_for(v) == checks.checks_for(vm.variant("e2b-ci"))
    for conf in vm.DROPINS[v.mode].values():
        assert (vm.GUEST / conf).is_file(), conf


# --- the real envd (envd_checks) -------------------------------------------

import envd_checks  # noqa: E402

ENVD_OK = {
    "envd_run_files": "755 root .\n444 root .E2B_SANDBOX\n644 root .E2B_SANDBOX_ID\n644 root .E2B_TEMPLATE_ID",
    "envd_cgroups": "ptys\nsocats\nuser",
    "envd_child_cgroup": "0::/user\n",
    "envd_nice": "-20",
    "envd_child_nice": "0",
    "envd_socats": "0",
    "envd_idle_journal_lines": "0",
    "envd_init_no_mmds_code": "204",
    "envd_init_nat": "-P PREROUTING ACCEPT\n-P OUTPUT ACCEPT\n"
                     "-A PREROUTING -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j RETURN\n"
                     "-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j RETURN",
    "guard_check_after_init_rc": "0",
    "envd_envs_after_init": "200",
    "envd_peers": "127.0.0.1:41234\n169.254.169.254:80",
}


def envd_verdicts(**over):
    res = {"report": {**ENVD_OK, **over}}
    return {name: fn(res)[0] for name, fn in envd_checks.COMMON.items()}


def test_envd_checks_pass_a_good_report():
    assert all(envd_verdicts().values()), envd_verdicts()


def test_envd_checks_fail_each_broken_report():
    assert not envd_verdicts(envd_run_files="644 root .E2B_SANDBOX")["envd_run_files"]
    assert not envd_verdicts(envd_child_cgroup="0::/system.slice/envd.service")["envd_cgroups"]
    assert not envd_verdicts(envd_cgroups="user")["envd_cgroups"]
    assert not envd_verdicts(envd_child_nice="-20")["envd_priorities"]
    assert not envd_verdicts(envd_nice="0")["envd_priorities"]
    assert not envd_verdicts(envd_socats="3")["envd_forwarder_quiet"]
    assert not envd_verdicts(envd_idle_journal_lines="40")["envd_forwarder_quiet"]
    assert not envd_verdicts(envd_peers="10.0.2.2:4318")["envd_no_log_exporter"]
    v = "envd_init_without_mmds_keeps_guard"
    assert not envd_verdicts(guard_check_after_init_rc="1")[v]
    assert not envd_verdicts(envd_init_nat="-P OUTPUT ACCEPT")[v]
    assert not envd_verdicts(envd_envs_after_init="401")[v]


# --- a lean boot --------------------------------------------------------------

def unit_line(unit, entered):
    return f"Id={unit} ActiveState=inactive SubState=dead NRestarts=0 Result=success ActiveEnterTimestampMonotonic={entered}"


def test_build_time_units_and_gettys_fail_when_they_ran():
    lean = {"services": "\n".join(unit_line(u, 0) for u in (*checks.BUILD_TIME_UNITS, "getty@tty1.service"))}
    assert checks.no_build_time_units({"report": lean})[0]
    assert checks.no_console_logins({"report": lean})[0]
    fat = {"services": lean["services"] + "\n" + unit_line("ldconfig.service", 24600000)
           + "\n" + unit_line("serial-getty@ttyS0.service", 55000000)}
    assert not checks.no_build_time_units({"report": fat})[0]
    assert not checks.no_console_logins({"report": fat})[0]


def test_kernel_ports_check_needs_every_port_refused():
    import vsock_checks
    err = vsock_checks.ERR_LINE
    ports = "41405,43955,43551,38875,57025"
    answers = "|".join(f"{p}={err} " for p in ports.split(",")) + "|"
    good = {"report": {"vsock_kernel_ports": ports, "vsock_kernel_answers": answers}}
    assert vsock_checks.refuses_kernel_ports(good)[0]
    leaked = {"report": {"vsock_kernel_ports": ports, "vsock_kernel_answers": answers.replace(f"41405={err}", "41405=OK")}}
    assert not vsock_checks.refuses_kernel_ports(leaked)[0]
    assert not vsock_checks.refuses_kernel_ports({"report": {"vsock_kernel_ports": "", "vsock_kernel_answers": ""}})[0]


def test_udev_coldplug_needs_the_sandbox_devices_and_the_narrow_replay():
    initialized = "1 block vda\n1 net eth0\n1 tty ttyS0\n0 tty tty5\n0 misc vsock"
    nodes = ("/dev/ttyS0 root:dialout 660\n/dev/tty5 root:root 600\n/dev/vcs1 root:root 600\n"
             "/dev/ptmx root:tty 666\n/dev/tty root:tty 666\n/dev/null root:root 666")
    assert checks.udev_coldplug({"report": {"udev_initialized": initialized, "dev_nodes": nodes}})[0]
    # eth0 never reached udev's database: networkd would wait for it forever.
    no_eth0 = initialized.replace("1 net eth0", "0 net eth0")
    assert not checks.udev_coldplug({"report": {"udev_initialized": no_eth0, "dev_nodes": nodes}})[0]
    # systemd's full replay (the drop-in gone): the consoles get group tty.
    full = nodes.replace("/dev/tty5 root:root", "/dev/tty5 root:tty")
    assert not checks.udev_coldplug({"report": {"udev_initialized": initialized, "dev_nodes": full}})[0]
    # The serial console's rule did not run.
    raw = nodes.replace("root:dialout 660", "root:root 600")
    assert not checks.udev_coldplug({"report": {"udev_initialized": initialized, "dev_nodes": raw}})[0]
    assert not checks.udev_coldplug({"report": {}})[0]


def test_skipped_without_work_needs_remount_fs_unstarted_and_no_dimm_properties():
    def rep(remount_exit, memory):
        return {"report": {"unit_times": "Id=systemd-remount-fs.service ActiveState=inactive SubState=dead "
                                         f"InactiveExitTimestampMonotonic={remount_exit}",
                           "udev_memory_properties": memory}}
    assert checks.skipped_without_work(rep(0, "0"))[0]
    # Its conditions gone: it started (and did nothing) on a rw root without an fstab.
    assert not checks.skipped_without_work(rep(10860000, "0"))[0]
    # 70-memory.rules not masked: udev imported the emulated DIMMs.
    assert not checks.skipped_without_work(rep(0, "4"))[0]
    assert not checks.skipped_without_work({"report": {}})[0]


def test_logind_on_demand_follows_the_power_button():
    def res(boot, ran_us, rc, ms, out=""):
        return {"boot": boot, "report": {
            "services": f"Id=systemd-logind.service ActiveState=inactive ActiveEnterTimestampMonotonic={ran_us}",
            "logind_ask_rc": rc, "logind_ask_ms": ms, "logind_ask_out": out}}
    # No power button: not at boot, started for the client.
    assert checks.logind_on_demand(res("e2b-rt", 0, "0", "1800"))[0]
    # Started at boot anyway (the wants link back), or a client left waiting
    # for D-Bus's time-out (a condition that also refuses activation).
    assert not checks.logind_on_demand(res("e2b-rt", 9120000, "0", "30"))[0]
    assert not checks.logind_on_demand(res("e2b-rt", 0, "1", "25210", "timed out (service_start_timeout=25000ms)"))[0]
    # With the power button: it ran at boot and answers.
    assert checks.logind_on_demand(res("e2b-ci-guard-fails", 9120000, "0", "80"))[0]
    assert not checks.logind_on_demand(res("e2b-ci-guard-fails", 0, "0", "1500"))[0]
    # Never loaded: not in the unit list at all.
    unlisted = res("e2b-rt", 0, "0", "690")
    unlisted["report"]["services"] = "Id=dbus.service ActiveState=active ActiveEnterTimestampMonotonic=15404031"
    assert checks.logind_on_demand(unlisted)[0]
    # Nothing reported: not a pass.
    assert not checks.logind_on_demand({"boot": "e2b-rt", "report": {}})[0]
    assert not checks.logind_on_demand(res("e2b-rt", 0, "", ""))[0]


def test_power_button_powers_off_wants_the_guests_own_shutdown():
    ok = {"reason": "guest-shutdown", "exited": True, "seconds": 6.2}
    assert checks.power_button_powers_off({"powerdown": ok})[0]
    # QEMU killed, or the press ignored (no logind: QEMU never exits).
    assert not checks.power_button_powers_off({"powerdown": {**ok, "reason": "host-signal"}})[0]
    assert not checks.power_button_powers_off({"powerdown": {**ok, "reason": "", "exited": False}})[0]
    assert not checks.power_button_powers_off({})[0]
    assert "guard-fails" in [v.name for v in vm.VARIANTS if v.power_button]
    assert checks.checks_for(vm.variant("e2b-ci", "guard-fails"))["power_button_powers_off"]
    assert "power_button_powers_off" not in checks.checks_for(vm.variant("e2b-rt"))
