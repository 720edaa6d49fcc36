"""The clone step's units as shipped (units/e2b-clone.socket,
units/e2b-clone.service): systemd accepts them, the port agrees with
common/vsock_ports.h, the socket goes to one resident service that the image
starts at boot and systemd restarts, the default admits the host (CID 2)
alone, and the service keeps the two capabilities the step needs, its
bounds, and no more exposure than before (systemd-analyze security)."""
import re
import shutil
import subprocess
import sys
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "relay"))

from relay_helpers import ROOT, vsock_ports  # noqa: E402

UNITS = ROOT / "units"


def keys(path, key):
    return [line.split("=", 1)[1].strip() for line in path.read_text().splitlines() if line.startswith(f"{key}=")]


def test_socket_and_service_as_shipped():
    sock, svc = UNITS / "e2b-clone.socket", UNITS / "e2b-clone.service"
    assert not (UNITS / "e2b-clone@.service").exists()  # no process per connection any more
    assert keys(sock, "ListenStream") == [f"vsock::{vsock_ports()['VSOCK_PORT_CLONE']}"]
    assert keys(sock, "Accept") == ["no"] and keys(sock, "Service") == []  # -> e2b-clone.service
    for unit in (sock, svc):
        assert "envd-guard.service" in " ".join(keys(unit, "Requires")).split()
        assert "envd-guard.service" in " ".join(keys(unit, "After")).split()
        assert keys(unit, "ConditionPathExists") == ["/dev/vsock"]
    assert {"e2b-clone.socket"} <= set(" ".join(keys(svc, "Requires") + keys(svc, "After")).split())
    # Resident: started at boot (so it is running in every snapshot), restarted if it dies.
    assert keys(svc, "WantedBy") == ["multi-user.target"] and keys(svc, "Restart") == ["always"]
    assert keys(svc, "RuntimeMaxSec") == [] and keys(svc, "StandardInput") == []
    assert keys(svc, "Environment") == ["E2B_CLONE_ALLOW_CID=2"]
    assert keys(svc, "ExecStart") == ["/usr/bin/e2b-clone --allow-cid=${E2B_CLONE_ALLOW_CID}"]
    assert keys(svc, "CapabilityBoundingSet") == ["CAP_SYS_ADMIN CAP_SYS_TIME"]
    assert keys(svc, "NoNewPrivileges") == ["yes"] and keys(svc, "ProtectSystem") == ["strict"]
    assert keys(svc, "ReadWritePaths") == ["/run/e2b -/etc/machine-id -/var/lib/systemd"]
    assert (keys(svc, "MemoryMax"), keys(svc, "TasksMax"), keys(svc, "LimitNOFILE")) == (["32M"], ["2"], ["64"])
    assert "d /run/e2b 0755 root root -" in (UNITS / "e2b-clone.tmpfiles").read_text()
    preset = (ROOT / "os-image/mkosi.extra/usr/lib/systemd/system-preset/10-e2b.preset").read_text().splitlines()
    assert "enable e2b-clone.socket" in preset and "enable e2b-clone.service" in preset
    assert "e2b-clone" in (ROOT / "os-image/image.mk").read_text().split("GUEST_TOOLS ?=")[1].splitlines()[0]


def test_systemd_accepts_them(tmp_path, release_tools):
    shutil.copy(UNITS / "e2b-clone.socket", tmp_path / "e2b-clone.socket")
    svc = (UNITS / "e2b-clone.service").read_text().replace("/usr/bin/e2b-clone",
                                                              release_tools.path("e2b-clone"))
    (tmp_path / "e2b-clone.service").write_text(svc)
    (tmp_path / "envd-guard.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    cp = subprocess.run(["systemd-analyze", "verify", "--man=no", str(tmp_path / "e2b-clone.socket"),
                         str(tmp_path / "e2b-clone.service")],
                        capture_output=True, text=True, timeout=60, env={"SYSTEMD_UNIT_PATH": f"{tmp_path}:",
                                                                        "PATH": "/usr/bin:/bin"})
    assert cp.returncode == 0 and not cp.stderr.strip(), cp.stderr
    cp = subprocess.run(["systemd-analyze", "security", "--offline=true", str(tmp_path / "e2b-clone.service")],
                        capture_output=True, text=True, timeout=60)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+) (\w+)", cp.stdout)
    # Root with CAP_SYS_ADMIN and CAP_SYS_TIME, by design (clone/README.md):
    # the score stays where those two put it (1.9, as the per-connection
    # e2b-clone@.service scored), nothing else adds to it.
    assert m and float(m.group(1)) <= 1.9, cp.stdout[-1500:]
    print(f"e2b-clone.service: systemd-analyze security {m.group(1)} {m.group(2)}")
