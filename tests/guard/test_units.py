"""The guard's systemd units: the fail-closed chain as written in the unit
files, checked by systemd's own parser (systemd-analyze verify)."""
import shutil
import subprocess

import pytest

from harness import BUILD, ROOT

UNITS = ROOT / "units"


def parse(path):
    """Unit file -> {section: {key: [values...]}} (repeated keys accumulate)."""
    sections, current = {}, None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def words(section, key):
    return [w for v in section.get(key, []) for w in v.split()]


def test_guard_unit():
    u = parse(UNITS / "envd-guard.service")
    unit, service, install = u["Unit"], u["Service"], u["Install"]
    assert unit["DefaultDependencies"] == ["no"]
    assert "systemd-modules-load.service" not in words(unit, "After"), \
        "nf_tables autoloads; waiting for module loading only delays envd"
    assert words(unit, "Wants") == ["network-pre.target"]
    before = set(words(unit, "Before"))
    assert {"envd.service", "mmds.socket", "mmds.service", "jupyter.service", "code-interpreter.service",
            "network-pre.target", "sysinit.target"} <= before
    assert service["Type"] == ["oneshot"] and service["RemainAfterExit"] == ["yes"]
    assert service["Nice"] == ["-20"], "on envd's critical path"
    assert service["CPUWeight"] == ["1000"], "between services, Nice= counts for nothing (cpu controller on)"
    assert service["ExecStart"] == ["/usr/bin/envd-guard install --ports ${E2B_GUARDED_PORTS}"]
    assert service["EnvironmentFile"] == ["/etc/e2b/guarded-ports"], "one list, shared with vsock-relay"
    assert "ExecStop" not in service, "stopping the unit must not take the guard down (fail closed)"
    assert service["CapabilityBoundingSet"] == ["CAP_NET_ADMIN"]
    assert "PrivateNetwork" not in service, "the guard must act on the host's network namespace"
    assert "AF_NETLINK" in words(service, "RestrictAddressFamilies")
    assert install["WantedBy"] == ["sysinit.target"]


def test_envd_unit_fails_closed():
    u = parse(UNITS / "envd.service")
    unit, service = u["Unit"], u["Service"]
    assert "envd-guard.service" in words(unit, "Requires")
    assert "envd-guard.service" in words(unit, "After")
    assert {"mmds.socket", "mmds.service"} <= set(words(unit, "After"))
    assert words(unit, "Wants") == ["mmds.socket"]
    assert unit["DefaultDependencies"] == ["no"]
    assert service["ExecStart"] == ["/usr/bin/envd"]
    assert service["Restart"] == ["always"]
    assert service["OOMScoreAdjust"] == ["-1000"]
    assert service["Nice"] == ["-20"]
    assert service["Delegate"] == ["yes"]
    assert "CPUWeight" not in service, "envd's port scanner would take the boot's CPU (os-image/README.md)"


def test_units_pass_systemd_analyze_verify(tmp_path):
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed")
    guard = BUILD / "envd-guard"
    if not guard.exists():
        pytest.fail(f"{guard} is missing: run `make tools` first")
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(guard, root / "usr/bin/envd-guard")
    # Stand-in for the envd release binary, only so verify finds an executable.
    envd = root / "usr/bin/envd"
    envd.write_text("#!/bin/sh\nexit 0\n")
    envd.chmod(0o755)
    for unit in ("envd-guard.service", "envd.service"):
        shutil.copy(UNITS / unit, root / "etc/systemd/system" / unit)
    cp = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={root}",
                         "envd-guard.service", "envd.service"], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0 and cp.stderr.strip() == "", cp.stderr
