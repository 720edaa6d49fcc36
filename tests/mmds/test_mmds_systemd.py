"""mmds-serve's systemd side: socket activation with both sockets passed in
(told apart by address family), sd_notify READY=1, and the shipped units
pass `systemd-analyze verify`."""
import os
import pathlib
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time

import pytest

from harness import ROOT, assert_no_sanitizer_report
from mmds_fixtures import curl, netns  # noqa: F401  (fixtures)


MMDS_UNITS = ("mmds.socket", "mmds-vsock.socket", "mmds.service", "mmds-fwcfg.service")


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
    (root / "usr/bin").mkdir(parents=True)
    shutil.copy(release_tools.path("mmds-serve"), root / "usr/bin/mmds-serve")
    shutil.copy("/usr/bin/mkdir", root / "usr/bin/mkdir")  # mmds.service's ExecStartPre
    for name in MMDS_UNITS:
        shutil.copy(ROOT / "units" / name, unitdir / name)
    guard = ROOT / "units" / "envd-guard.service"
    if guard.exists():
        shutil.copy(guard, unitdir / "envd-guard.service")
    else:  # the guard helper ships it; a stand-in until then
        (unitdir / "envd-guard.service").write_text("[Service]\nType=oneshot\nExecStart=/bin/true\n")
    systemd_units = pathlib.Path("/lib/systemd/system")
    shutil.copytree(systemd_units, root / "usr/lib/systemd/system", symlinks=True)
    cp = subprocess.run(["systemd-analyze", "verify", f"--root={root}",
                         *(f"/etc/systemd/system/{name}" for name in MMDS_UNITS)],
                        capture_output=True, text=True, timeout=120)
    problems = [l for l in cp.stderr.splitlines() if "mmds" in l]
    assert cp.returncode == 0 and not problems, cp.stderr
    sec = subprocess.run(["systemd-analyze", "security", "--offline=true", f"--root={root}",
                          "--threshold=20", "mmds.service"], capture_output=True, text=True, timeout=120)
    assert sec.returncode == 0, sec.stdout[-2000:] + sec.stderr


def _unit_lines(name):
    return [l.strip() for l in (ROOT / "units" / name).read_text().splitlines()
            if l.strip() and not l.lstrip().startswith("#")]


def test_document_directory_is_roots_and_read_only_to_the_service(release_tools, netns, curl):
    """/run/mmds comes from the shipped tmpfiles.d entry: root's, 0755. The
    unit does not hand it to its dynamic user (RuntimeDirectory= would chown
    it). mmds-serve, run under a non-root uid as DynamicUser= runs it, serves
    the document from there, and that uid cannot create a file in it."""
    lines = _unit_lines("mmds.service")
    assert not [l for l in lines if l.startswith("RuntimeDirectory")], lines
    # Without waiting for systemd-tmpfiles-setup, the unit makes it as root
    # ("+": outside the sandbox), with the tmpfiles entry's mode.
    assert "ExecStartPre=+/usr/bin/mkdir -p --mode=0755 /run/mmds" in lines, lines
    assert not [l for l in lines if l.startswith("After=") and "systemd-tmpfiles-setup" in l], lines
    assert "ProtectSystem=strict" in lines and "DynamicUser=yes" in lines
    top = pathlib.Path(tempfile.mkdtemp(prefix="mmds-tmpfiles-"))
    try:
        os.chmod(top, 0o755)  # the unprivileged server must reach the document
        conf = top / "usr/lib/tmpfiles.d/mmds.conf"
        conf.parent.mkdir(parents=True)
        shutil.copy(ROOT / "units" / "mmds.tmpfiles", conf)
        cp = subprocess.run(["systemd-tmpfiles", "--create", f"--root={top}", "mmds.conf"],
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        d = top / "run/mmds"
        st = os.stat(d)
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 0, 0o755)
        os.chmod(top / "run", 0o755)
        # Root's writer, as the README says: unique temp name, then rename.
        fd, tmp = tempfile.mkstemp(prefix=".document.json.", dir=d)
        os.write(fd, b'{"k": "from root"}')
        os.close(fd)
        os.chmod(tmp, 0o644)
        os.rename(tmp, d / "document.json")

        uid = "64123"  # no such user: what a dynamic user looks like to the kernel
        as_service = ["setpriv", "--reuid", uid, "--regid", uid, "--clear-groups", "--"]
        netns.run("sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=0", check=True)
        log = open(top / "log", "w+")
        p = netns.popen(*as_service, release_tools.path("mmds-serve"), "--document", d / "document.json",
                        stdout=subprocess.DEVNULL, stderr=log)
        try:
            end = time.monotonic() + 20
            while time.monotonic() < end:
                r = curl("/latest/api/token", "-H", "X-metadata-token-ttl-seconds: 60", method="PUT")
                if r.status == 200:
                    break
                time.sleep(0.1)
            assert curl("/k", token=curl.token()).body == "from root"
            planted = d / "planted"
            cp = netns.run(*as_service, "sh", "-c", f"echo x > {planted}", timeout=30)
            assert cp.returncode != 0 and "Permission denied" in cp.stderr, cp
            assert not planted.exists()
        finally:
            p.terminate()
            p.wait(20)
            log.close()
        assert p.returncode == 0, (top / "log").read_text()
    finally:
        shutil.rmtree(top)


def _fwcfg_command(tools):
    """mmds-fwcfg.service's ExecStart, with the mmds-serve under test for the
    installed one."""
    line, = [l for l in _unit_lines("mmds-fwcfg.service") if l.startswith("ExecStart=")]
    argv = shlex.split(line.partition("=")[2])
    assert argv[0] == "/usr/bin/mmds-serve", argv
    return [str(tools.path("mmds-serve")), *argv[1:]]


def _in_fake_guest(tmp_path, script, raw=None):
    """Runs script in a private mount namespace where /sys/firmware holds a
    fw_cfg entry opt/e2b/mmds (raw: its bytes; a directory if None) and
    /run/mmds is an empty root-owned 0755 directory, as tmpfiles makes it."""
    fw = tmp_path / "fw"
    entry = fw / "qemu_fw_cfg/by_name/opt/e2b/mmds"
    entry.mkdir(parents=True)
    if raw is None:
        (entry / "raw").mkdir()
    else:
        (entry / "raw").write_bytes(raw)
    run = tmp_path / "run"
    (run / "mmds").mkdir(parents=True)
    os.chmod(run / "mmds", 0o755)
    setup = (f"mount --bind {fw} /sys/firmware && mount --bind {run} /run && "
             f'exec "$@"')
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", setup, "sh", *script],
                          capture_output=True, text=True, timeout=60), run / "mmds"


def test_fwcfg_unit_writes_the_document_atomically(tools, tmp_path):
    doc = b'{"instanceID": "from-fw-cfg",\n "envID": "tmpl"}\n'
    cp, d = _in_fake_guest(tmp_path, _fwcfg_command(tools), raw=doc)
    assert cp.returncode == 0, cp.stderr
    assert sorted(p.name for p in d.iterdir()) == ["document.json"]  # no temporary left
    assert (d / "document.json").read_bytes() == b'{"envID":"tmpl","instanceID":"from-fw-cfg"}'  # compact
    assert stat.S_IMODE(os.stat(d / "document.json").st_mode) == 0o644
    assert "/sys/firmware/qemu_fw_cfg/by_name/opt/e2b/mmds/raw: imported into /run/mmds/document.json" in cp.stderr
    assert_no_sanitizer_report(cp)


@pytest.mark.parametrize("raw, says", [
    (None, "/sys/firmware/qemu_fw_cfg/by_name/opt/e2b/mmds/raw: Is a directory"),  # unreadable entry
    (b'{"instanceID": ', "/sys/firmware/qemu_fw_cfg/by_name/opt/e2b/mmds/raw: invalid JSON at line 1"),
    (b'{"k": "' + b"x" * 51200 + b'"}', "document over the 51200-byte limit"),
], ids=["unreadable", "not-json", "too-big"])
def test_fwcfg_unit_failure_leaves_nothing(tools, tmp_path, raw, says):
    cp, d = _in_fake_guest(tmp_path, _fwcfg_command(tools), raw=raw)
    assert cp.returncode == 1, cp
    assert says in cp.stderr and "/run/mmds/document.json left as it was" in cp.stderr, cp.stderr
    assert list(d.iterdir()) == []  # neither a document nor a temporary
    assert_no_sanitizer_report(cp)


def test_fwcfg_unit_ordering_and_condition():
    lines = _unit_lines("mmds-fwcfg.service")
    assert "ConditionPathExists=/sys/firmware/qemu_fw_cfg/by_name/opt/e2b/mmds/raw" in lines
    before = " ".join(l.partition("=")[2] for l in lines if l.startswith("Before="))
    assert "mmds.service" in before.split() and "envd.service" in before.split()
    service = _unit_lines("mmds.service")
    assert "Wants=mmds-fwcfg.service" in service and "After=mmds-fwcfg.service" in service


def test_vsock_socket_unit():
    """Port 10052, the host API's socket for mmds.service, guarded, and
    skipped (not failed) on a guest without vsock; the service passes the
    policy from one Environment= line."""
    sock = _unit_lines("mmds-vsock.socket")
    assert "ListenStream=vsock::10052" in sock and "Service=mmds.service" in sock
    assert "ConditionPathExists=/dev/vsock" in sock
    assert "Requires=envd-guard.service" in sock and "After=envd-guard.service" in sock
    service = _unit_lines("mmds.service")
    assert "Sockets=mmds.socket mmds-vsock.socket" in service
    assert "Environment=MMDS_CONTROL_VSOCK_ALLOW_CID=2" in service
    exec_start, = [l for l in service if l.startswith("ExecStart=")]
    assert "--control-vsock-allow-cid=${MMDS_CONTROL_VSOCK_ALLOW_CID}" in exec_start
    assert "--fd-store" in exec_start
    assert any(l.startswith("FileDescriptorStoreMax=") and int(l.split("=")[1]) >= 2 for l in service)
