"""The relay units as shipped: their vsock ports agree with common/vsock_ports.h
(the C side's one definition), the presets enable them (e2b-ci's 49999 only in
e2b-ci), every relay starts only after the guard and requires it (fail
closed), and systemd accepts them: `systemd-analyze verify` is clean and
`security` rates each service SAFE."""
import re
import shutil
import subprocess

import pytest

from relay_helpers import ROOT, vsock_ports

UNITS = ROOT / "units"
PORTS = vsock_ports()
PRESETS = ROOT / "os-image/mkosi.extra/usr/lib/systemd/system-preset"
CI_PRESETS = ROOT / "os-image/mkosi.profiles/e2b-ci/mkosi.extra/usr/lib/systemd/system-preset"


def keys(path, key):
    return [v.strip() for k, _, v in (l.partition("=") for l in path.read_text().splitlines()) if k.strip() == key]


GUARDED_FILE = ROOT / "os-image/mkosi.extra/etc/e2b/guarded-ports"
GUARDED_H = ROOT / "common/guarded_ports.h"


def guarded_default() -> str:
    """GUARDED_PORTS_DEFAULT of common/guarded_ports.h, the C side's list."""
    m = re.search(r'^#define GUARDED_PORTS_DEFAULT "([0-9,]+)"$', GUARDED_H.read_text(), re.M)
    assert m, GUARDED_H
    return m.group(1)


def test_one_list_of_guarded_ports():
    """envd-guard.service and vsock-relay.service read the same file, shipped
    in every image as /etc/e2b/guarded-ports, pass its one variable to
    --ports and --guarded, and the file says what the C default says."""
    values = [v for k, _, v in (l.partition("=") for l in GUARDED_FILE.read_text().splitlines())
              if k == "E2B_GUARDED_PORTS"]
    assert values == [guarded_default()], values
    for unit, option in (("envd-guard.service", "--ports"), ("vsock-relay.service", "--guarded")):
        assert keys(UNITS / unit, "EnvironmentFile") == ["/etc/e2b/guarded-ports"], unit
        argv = " ".join(keys(UNITS / unit, "ExecStart")).split()
        assert f"{option}" in argv and argv[argv.index(option) + 1] == "${E2B_GUARDED_PORTS}", (unit, argv)


@pytest.mark.parametrize("port,ok", [(49983, True), (49999, True), (8888, False), (3000, False), (80, False)])
def test_proxy_unit_starts_only_for_the_fixed_relays(release_tools, port, ok):
    """vsock-proxy@PORT.service's own command line, run as systemd would for
    the instance (no socket passed): the fixed relays' ports get as far as
    looking for their socket; any other port is refused at once."""
    argv = " ".join(keys(UNITS / "vsock-proxy@.service", "ExecStart")).replace("%i", str(port)).split()
    argv[0] = release_tools.path("vsock-relay")
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if ok:
        assert cp.returncode == 1 and "no listening socket" in cp.stderr, cp.stderr
    else:
        assert cp.returncode == 2 and f"--to-port {port}: " in cp.stderr, cp.stderr


def test_ports_agree_with_the_header():
    assert keys(UNITS / "vsock-relay.socket", "ListenStream") == [f"vsock::{PORTS['VSOCK_PORT_RELAY']}"]
    assert keys(UNITS / "vsock-proxy@.socket", "ListenStream") == ["vsock::%i"]


def enabled_by_presets(tmp_path, preset_dirs):
    """`systemctl preset-all` (what mkosi runs) on a root with our units and presets."""
    root = tmp_path / "root"
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system-preset").mkdir(parents=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    for u in ("vsock-proxy@.socket", "vsock-proxy@.service", "vsock-relay.socket", "vsock-relay.service"):
        shutil.copy(UNITS / u, root / "usr/lib/systemd/system" / u)
    for d in preset_dirs:
        for p in d.glob("*.preset"):
            shutil.copy(p, root / "usr/lib/systemd/system-preset" / p.name)
    subprocess.run(["systemctl", f"--root={root}", "preset-all"], capture_output=True, text=True, check=True)
    wants = root / "etc/systemd/system/sockets.target.wants"
    return sorted(p.name for p in wants.iterdir()) if wants.exists() else []


def test_presets_enable_the_relays_per_flavor(tmp_path):
    envd, ci = PORTS["VSOCK_PORT_ENVD"], PORTS["VSOCK_PORT_CODE_INTERPRETER"]
    assert enabled_by_presets(tmp_path / "rt", [PRESETS]) == [f"vsock-proxy@{envd}.socket", "vsock-relay.socket"]
    assert enabled_by_presets(tmp_path / "ci", [PRESETS, CI_PRESETS]) == [
        f"vsock-proxy@{envd}.socket", f"vsock-proxy@{ci}.socket", "vsock-relay.socket"]


def test_shipped_by_every_flavor():
    """build.sh ships what the base presets enable, each socket with its service."""
    enabled = [line.split()[1] for line in PRESETS.joinpath("10-e2b.preset").read_text().splitlines()
               if line.startswith("enable ")]
    for socket in ("vsock-proxy@.socket", "vsock-relay.socket"):
        assert socket in enabled, socket
        assert (UNITS / socket).is_file() and (UNITS / socket.replace(".socket", ".service")).is_file(), socket
    assert "vsock-relay" in (ROOT / "os-image/image.mk").read_text().split("GUEST_TOOLS ?=")[1].splitlines()[0]


@pytest.mark.parametrize("unit", ["vsock-relay.socket", "vsock-relay.service", "vsock-proxy@.socket",
                                  "vsock-proxy@.service"])
def test_after_and_requires_the_guard(unit):
    p = UNITS / unit
    assert "envd-guard.service" in " ".join(keys(p, "Requires")).split(), unit
    assert "envd-guard.service" in " ".join(keys(p, "After")).split(), unit


def test_systemd_accepts_them(tmp_path, release_tools):
    """verify and security on copies (instance 49983, tools at build/ paths)."""
    for u in ("vsock-relay.socket", "vsock-relay.service", "envd-guard.service"):
        shutil.copy(UNITS / u, tmp_path / u)
        (tmp_path / u).write_text((tmp_path / u).read_text().replace("/etc/e2b/guarded-ports", str(GUARDED_FILE)))
    for kind in ("socket", "service"):
        shutil.copy(UNITS / f"vsock-proxy@.{kind}", tmp_path / f"vsock-proxy@49983.{kind}")
    for p in tmp_path.glob("*.service"):
        p.write_text(p.read_text().replace("/usr/bin/vsock-relay", release_tools.path("vsock-relay"))
                     .replace("/usr/bin/envd-guard", "/bin/true"))
    names = ["vsock-relay.socket", "vsock-relay.service", "vsock-proxy@49983.socket", "vsock-proxy@49983.service"]
    cp = subprocess.run(["systemd-analyze", "verify", "--man=no", *[str(tmp_path / n) for n in names]],
                        capture_output=True, text=True, timeout=60, env={"SYSTEMD_UNIT_PATH": f"{tmp_path}:",
                                                                        "PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0 and not cp.stderr.strip(), cp.stderr
    for n in ("vsock-relay.service", "vsock-proxy@49983.service"):
        cp = subprocess.run(["systemd-analyze", "security", "--offline=true", str(tmp_path / n)],
                            capture_output=True, text=True, timeout=60)
        m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", cp.stdout)
        assert m and m.group(2) == "SAFE", cp.stdout[-500:]
