"""Issue 49, end to end: a hostile E2B template (RUN steps) and a hostile
template.conf template (`run =` lines), built for real (`make template=`,
confined mkosi) on warm e2b-rt, each probing as root what a build step on a
shared build host must never reach (tests/sandbox/probe.py): the host's ids,
sysctl and sysrq, other tenants' outputs and the shared caches under out/,
the operator's home, the environment make runs with (a registry password),
the operator's terminal (make runs with a pty as its controlling terminal,
as from a shell), a descriptor make inherited, and the host's loopback,
own address and abstract sockets. Each writes what it reached into its own
image, where the test reads it back; each probe reached the host before the
sandbox changed (issue 49's findings 1 to 4, 6 and 9).

The E2B template's first step installs python3 with apt-get: RUN steps still
have egress through the sandbox's own network."""
import base64
import fcntl
import json
import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import termios

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import harness  # noqa: E402
import testimages  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

ROOT = testimages.ROOT
PROBE = pathlib.Path(__file__).resolve().parent / "probe.py"
RESULT = "usr/lib/e2b-probe.json"


def host_address():
    cp = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, check=True)
    return next(a["local"] for i in json.loads(cp.stdout) for a in i.get("addr_info", [])
                if not a["local"].startswith("127."))


@pytest.fixture
def host(tmp_path):
    """What the operator's build host holds that a step must not reach."""
    token = secrets.token_hex(16)
    canaries = [ROOT / "out" / f"e2b-test-canary-{token[:8]}" / "secret",
                testimages.CACHE / "e2b-steps" / f"e2b-test-canary-{token[:8]}" / "secret",
                testimages.CACHE / "e2b-images" / f"e2b-test-canary-{token[:8]}" / "secret"]
    home = tmp_path / "home"
    canaries.append(home / ".docker" / "config.json")
    for c in canaries:
        c.parent.mkdir(parents=True, exist_ok=True)
        c.write_text(token)
    fd_dir = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-canary-", dir="/var/tmp"))
    listeners = []
    for addr in ("127.0.0.1", host_address()):
        s = socket.socket()
        s.bind((addr, 0))
        s.listen(8)
        listeners.append(s)
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0e2b-test-{token[:8]}")
    abstract.listen(8)
    inside = []
    for c in canaries:
        inside.append(str(c))
        if c.is_relative_to(ROOT):  # the checkout, where mkosi mounted it before
            inside.append(f"/work/src/{c.relative_to(ROOT)}")
    args = ["--secret", token, "--fd-write", f"pwned-{token[:8]}", "--fd-target", str(fd_dir),
            "--tiocsti", "echo typed-by-a-step",
            "--abstract", f"e2b-test-{token[:8]}"]
    for p in inside:
        args += ["--path", p]
    for s in listeners:
        a, port = s.getsockname()
        args += ["--tcp", f"{a}:{port}"]
        if a == "127.0.0.1":
            args += ["--tcp", f"10.0.2.2:{port}"]  # the host's loopback as slirp4netns offers it
    yield {"token": token, "home": home, "fd_dir": fd_dir, "listeners": listeners, "abstract": abstract,
           "probe_args": args}
    for s in (*listeners, abstract):
        s.close()
    for c in canaries[:3]:
        shutil.rmtree(c.parent, ignore_errors=True)
    shutil.rmtree(fd_dir, ignore_errors=True)


def build_as_the_operator(directory, out, host):
    """`make template=DIR` as an operator runs it: from a shell whose
    terminal is make's controlling terminal and stdin, with secrets in the
    environment and a descriptor left open; what the terminal received."""
    master, slave = os.openpty()
    fd = os.open(host["fd_dir"], os.O_RDONLY | os.O_DIRECTORY)
    env = {**os.environ, "REGISTRY_PASSWORD": host["token"], "AWS_SECRET_ACCESS_KEY": host["token"],
           "HOME": str(host["home"])}
    try:
        cp = testimages.make("e2b-rt", out, "image", f"template={directory}", env=env, stdin=slave,
                             pass_fds=(fd,), start_new_session=True,
                             preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    finally:
        os.close(fd)
        os.close(slave)
    os.set_blocking(master, False)
    seen = harness.read_pty(master)
    os.close(master)
    return cp, seen


def probe_command(host, python="/usr/bin/python3", script="/usr/lib/e2b-probe/probe.py"):
    return " ".join([python, script, "--out", "/" + RESULT, *(f"'{a}'" for a in host["probe_args"])])


def check_nothing_reached(out, name, cp, seen, host):
    assert cp.returncode == 0, cp.stderr[-4000:]
    found = json.loads((out / name / "work/mkosi-out/image" / RESULT).read_text())
    inside, at, count = map(int, found["uid_map"].split())
    assert inside == 0 and at != 0 and count == 65536, found["uid_map"]
    assert found["tried"] > 20 and found["reached"] == [], found
    assert b"typed-by-a-step" not in seen, seen
    assert list(host["fd_dir"].iterdir()) == []
    for s in (*host["listeners"], host["abstract"]):
        s.setblocking(False)
        with pytest.raises(BlockingIOError):
            s.accept()
    # What the build left of its work is its operator's alone.
    assert (out / name / "work").stat().st_mode & 0o777 == 0o700


def test_a_hostile_e2b_template_reaches_nothing_of_the_host(tmp_path, host):
    d = tmp_path / "hostile-e2b"
    d.mkdir()
    b64 = base64.b64encode(PROBE.read_bytes()).decode()
    steps = ["apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3",
             f"mkdir -p /usr/lib/e2b-probe && echo {b64} | base64 -d > /usr/lib/e2b-probe/probe.py",
             probe_command(host)]
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-rt", "steps": [
        {"type": "RUN", "args": [cmd, "root"], "force": False} for cmd in steps]}))
    out = tmp_path / "out"
    cp, seen = build_as_the_operator(d, out, host)
    check_nothing_reached(out, "hostile-e2b", cp, seen, host)
    # Egress still works: the first step installed python3 from the build's mirror.
    assert (out / "hostile-e2b/work/mkosi-out/image/usr/bin/python3").exists()


def test_a_hostile_template_conf_reaches_nothing_of_the_host(tmp_path, host):
    d = tmp_path / "hostile"
    d.mkdir()
    shutil.copy(PROBE, d / "probe.py")
    (d / "template.conf").write_text(
        "name = hostile\nbase = e2b-rt\npackages = python3\n"
        "file = probe.py /usr/lib/e2b-probe/probe.py root 0755\n"
        f"run = {probe_command(host)}\n")
    out = tmp_path / "out"
    cp, seen = build_as_the_operator(d, out, host)
    check_nothing_reached(out, "hostile", cp, seen, host)
