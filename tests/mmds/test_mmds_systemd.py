"""mmds-serve's systemd side: socket activation with both sockets passed in
(told apart by address family), sd_notify READY=1, and the shipped units
pass `systemd-analyze verify`."""
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import time

import pytest

from harness import ROOT, assert_no_sanitizer_report
from mmds_fixtures import curl, netns  # noqa: F401  (fixtures)


def test_socket_activation_and_notify(tools, netns, curl, tmp_path):
    control = tmp_path / "control.sock"
    notify_path = tmp_path / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(10)
    doc = tmp_path / "document.json"
    doc.write_text('{"from": "activation"}')
    env = dict(os.environ, NOTIFY_SOCKET=str(notify_path))
    log = open(tmp_path / "log", "w+")
    proc = netns.popen(
        "systemd-socket-activate", "-E", "NOTIFY_SOCKET", "-E", "ASAN_OPTIONS", "-E", "UBSAN_OPTIONS",
        "-E", "LSAN_OPTIONS", "-l", "169.254.169.254:80", "-l", control,
        tools.path("mmds-serve"), "--document", doc, env=env, stderr=log, stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not control.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        # systemd-socket-activate starts the service on the first connection.
        r = curl("/from", token=curl.token())
        assert r.body == "activation", r
        msgs = []
        while not any("READY=1" in m for m in msgs):
            msgs.append(notify.recv(4096).decode())
        assert any("STATUS=" in m for m in msgs)
        r = curl("/mmds", unix=control, method="PATCH", data='{"from":"control"}')
        assert r.status == 204
        assert curl("/from", token=curl.token()).body == "control"
        log.flush()
        assert "listening on" not in open(tmp_path / "log").read()  # no standalone socket
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        notify.close()
        log.close()
    cp = subprocess.CompletedProcess(proc.args, proc.returncode, "", (tmp_path / "log").read_text())
    assert_no_sanitizer_report(cp)
    assert proc.returncode == 0, cp.stderr


def test_units_verify(release_tools, tmp_path):
    """systemd-analyze verify in a scratch root holding the units, the
    binary at its install path and a stand-in envd-guard.service."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze missing")
    root = tmp_path / "root"
    unitdir = root / "etc/systemd/system"
    unitdir.mkdir(parents=True)
    (root / "usr/local/bin").mkdir(parents=True)
    shutil.copy(release_tools.path("mmds-serve"), root / "usr/local/bin/mmds-serve")
    for name in ("mmds.socket", "mmds.service"):
        shutil.copy(ROOT / "units" / name, unitdir / name)
    guard = ROOT / "units" / "envd-guard.service"
    if guard.exists():
        shutil.copy(guard, unitdir / "envd-guard.service")
    else:  # the guard helper ships it; a stand-in until then
        (unitdir / "envd-guard.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    systemd_units = pathlib.Path("/lib/systemd/system")
    shutil.copytree(systemd_units, root / "usr/lib/systemd/system", symlinks=True)
    cp = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                         "/etc/systemd/system/mmds.socket", "/etc/systemd/system/mmds.service"],
                        capture_output=True, text=True, timeout=120)
    problems = [l for l in cp.stderr.splitlines() if "mmds" in l]
    assert cp.returncode == 0 and not problems, cp.stderr
    sec = subprocess.run(["systemd-analyze", "security", "--offline=true", f"--root={root}",
                          "--threshold=20", "mmds.service"], capture_output=True, text=True, timeout=120)
    assert sec.returncode == 0, sec.stdout[-2000:] + sec.stderr
