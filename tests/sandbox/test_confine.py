"""sandbox/confine.py, on its own (issue 37): what a root process inside
can and cannot do. The end-to-end tests are a real builder build with a
trojan base (test_builder_hostile.py) and template build commands
(tests/template/test_template_build.py); these pin each property down in
a second: root inside still is root over the tree it is given (the image's
files keep their owners), and over nothing else."""
import fcntl
import json
import os
import pathlib
import secrets
import socket
import subprocess
import termios
import time

import pytest

import harness
import netns

ROOT = pathlib.Path(__file__).resolve().parents[2]


def confine(*args, timeout=60, env=None, pass_fds=()):
    return subprocess.run(["/usr/bin/python3", "-m", "sandbox.confine", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**(env or os.environ), "PYTHONPATH": str(ROOT)},
                          pass_fds=pass_fds)


def sh(tmp_path, script, *opts):
    return confine(*opts, "--", "/bin/sh", "-c", script)


def test_the_host_is_out_of_reach(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "precious").write_text("the host's\n")
    me = os.getpid()
    cp = sh(tmp_path, f"""
        for r in /proc/[0-9]*/root; do echo pwned > $r{host}/precious 2>/dev/null && echo "wrote $r"; done
        ls /proc/{me} >/dev/null 2>&1 && echo "sees the host's pid {me}"
        umount /proc 2>/dev/null; ls /proc/{me} >/dev/null 2>&1 && echo "sees it under /proc"
        mknod /tmp/disk b 8 0 2>/dev/null && echo mknod
        test -e /etc/shadow && echo shadow
        test -e {host} && echo "sees {host}"
        echo done""")
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["done"], cp.stdout
    assert (host / "precious").read_text() == "the host's\n"


def test_read_only_stays_read_only_and_binds_keep_owners(tmp_path):
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "f").write_text("ro\n")
    cp = sh(tmp_path, f"""
        echo x > {ro}/f 2>/dev/null && echo "wrote ro"
        mount -o remount,rw,bind {ro} 2>/dev/null && echo remounted
        umount {ro} 2>/dev/null && echo unmounted
        echo y > {rw}/f && chown 1000:1000 {rw}/f && echo "wrote rw"
        id -u""", "--ro-bind", ro, "--bind", rw)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout.split() == ["wrote", "rw", "0"], cp.stdout
    assert (ro / "f").read_text() == "ro\n"
    st = (rw / "f").stat()
    assert (rw / "f").read_text() == "y\n" and (st.st_uid, st.st_gid) == (1000, 1000)


def test_an_overlay_drops_what_the_command_changed(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "pkg").write_text("signed\n")
    cp = sh(tmp_path, f"echo poisoned > {cache}/pkg && touch {cache}/new && cat {cache}/pkg",
            "--overlay", cache)
    assert cp.returncode == 0 and cp.stdout == "poisoned\n", (cp.stdout, cp.stderr)
    assert sorted(p.name for p in cache.iterdir()) == ["pkg"] and (cache / "pkg").read_text() == "signed\n"


def test_exit_status_and_no_process_outlives_the_command(tmp_path):
    # A sleep of a length no other process on this shared machine has.
    left = f"sleep {300 + secrets.randbelow(10 ** 6)}"
    t0 = time.monotonic()
    cp = sh(tmp_path, f"(setsid {left} &) ; exit 7")
    assert cp.returncode == 7
    assert time.monotonic() - t0 < 30
    assert left not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


def test_bad_arguments_are_named(tmp_path):
    cp = confine("--bind", "relative/path", "--", "true")
    assert cp.returncode != 0 and "relative/path: not an absolute path that exists" in cp.stderr
    cp = confine("--", "/no/such/program")
    assert cp.returncode == 127 and "/no/such/program" in cp.stderr


# Issue 49: what a root process inside cannot do now that root inside is an
# unprivileged id of the host, in a network, session and environment of its
# own. Each probe (tests/sandbox/probe.py) records only what it reached.
PROBE = pathlib.Path(__file__).resolve().parent / "probe.py"


def probed(tmp_path, *probe_args, opts=(), **kw):
    """The probe run confined, as root inside; its findings."""
    out = tmp_path / "probe-out"
    out.mkdir(exist_ok=True)
    cp = confine("--bind", out, "--ro-bind", PROBE, *opts, "--", "/usr/bin/python3", PROBE, "--out", out / "probe.json",
                 *map(str, probe_args), **kw)
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    return json.loads((out / "probe.json").read_text())


def test_root_inside_is_an_unprivileged_id_range_of_the_host(tmp_path):
    """Finding 1: root inside was the host's uid 0, which the kernel lets
    write /proc/sys with no capability check. Now it is the first id of a
    slot of e2b-build's subordinate ids; it opens no sysctl and no
    sysrq-trigger for writing, in the host's /proc nor in a fresh one."""
    starts = [int(line.split(":")[1]) for line in pathlib.Path("/etc/subuid").read_text().splitlines()
              if line.startswith("e2b-build:")]
    found = probed(tmp_path)
    inside, host, count = map(int, found["uid_map"].split())
    assert inside == 0 and count == 65536 and host != 0, found["uid_map"]
    assert any(s <= host < s + (1 << 32) for s in starts), (host, starts)
    assert found["tried"] >= 12 and found["reached"] == [], found


def test_the_callers_secrets_descriptors_and_home_stay_out(tmp_path):
    """Findings 4 and 9: the caller's environment (a registry password) was
    in /proc/*/environ of the sandbox's own processes, and a descriptor
    the caller held (on a host directory) was a way to write through
    /proc/1/fd/N. Neither is there now; nor is the caller's home."""
    secret = secrets.token_hex(16)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".docker-config.json").write_text(secret)
    hostdir = tmp_path / "hostdir"
    hostdir.mkdir()
    fd = os.open(hostdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        found = probed(tmp_path, "--secret", secret, "--fd-write", "pwned", "--fd-target", hostdir, "--path", home / ".docker-config.json",
                       env={**os.environ, "REGISTRY_PASSWORD": secret, "HOME": str(home)}, pass_fds=(fd,))
    finally:
        os.close(fd)
    assert found["reached"] == [], found
    assert list(hostdir.iterdir()) == []


def test_no_terminal_of_the_callers(tmp_path):
    """Finding 3: steps held the operator's terminal (stdin, /dev/tty) and
    typed into it with TIOCSTI. Inside now: a session of its own, stdin
    /dev/null, /dev/tty a /dev/null; what it prints reaches the terminal
    escaped."""
    master, slave = os.openpty()
    try:
        out = tmp_path / "probe-out"
        out.mkdir()
        p = subprocess.Popen(["/usr/bin/python3", "-m", "sandbox.confine", "--bind", str(out), "--ro-bind", str(PROBE),
                              "--", "/bin/sh", "-c",
                              f"/usr/bin/python3 {PROBE} --out {out}/probe.json --tiocsti 'echo typed-by-a-step\n';"
                              " printf 'evil \\033]0;owned\\007 done\\n'"],
                             stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "PYTHONPATH": str(ROOT)},
                             start_new_session=True,
                             preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        slave = None
        seen = harness.read_pty(master)
        assert p.wait(timeout=60) == 0, seen
    finally:
        os.close(master)
        if slave is not None:
            os.close(slave)
    found = json.loads((out / "probe.json").read_text())
    assert found["reached"] == [], found
    assert b"typed-by-a-step" not in seen, seen
    assert b"evil \\x1b]0;owned\\x07 done" in seen and b"\x1b]0;owned" not in seen, seen


@pytest.fixture
def host_like(tmp_path):
    """A network namespace standing in for the build host (the sandbox's
    slirp4netns runs in it): a metadata service on 169.254.169.254:80 and
    a service on its loopback and on its own address, an abstract unix
    socket; and behind a veth, a second namespace standing in for the
    internet (198.51.100.1), which the sandbox must still reach."""
    host, net = netns.Netns("sbx", "host"), netns.Netns("sbx", "inet")
    try:
        netns.veth_pair(host, net)
        host.ip("addr", "add", "198.51.100.2/24", "dev", "veth0")
        host.ip("link", "set", "veth0", "up")
        host.ip("addr", "add", "169.254.169.254/32", "dev", "lo")
        net.ip("addr", "add", "198.51.100.1/24", "dev", "veth0")
        net.ip("link", "set", "veth0", "up")
        listeners = {}
        for ns, addr in ((host, "127.0.0.1"), (host, "169.254.169.254"), (host, "198.51.100.2"),
                         (net, "198.51.100.1")):
            with ns.entered():
                s = socket.socket()
                s.bind((addr, 0))
                s.listen(8)
            listeners[addr] = s
        with host.entered():
            abstract = socket.socket(socket.AF_UNIX)
            name = f"e2b-test-{secrets.token_hex(4)}"
            abstract.bind("\0" + name)
            abstract.listen(8)
        yield host, listeners, abstract, name
        for s in (*listeners.values(), abstract):
            s.close()
    finally:
        host.close()
        net.close()


def accepted(s):
    s.setblocking(False)
    try:
        s.accept()[0].close()
        return True
    except BlockingIOError:
        return False


def confined_in(host, tmp_path, *args):
    out = tmp_path / "probe-out"
    out.mkdir(exist_ok=True)
    cp = host.run("env", f"PYTHONPATH={ROOT}", "/usr/bin/python3", "-m", "sandbox.confine", "--bind", out,
                  "--ro-bind", PROBE, *args[0],
                  "--", "/usr/bin/python3", PROBE, "--out", out / "probe.json", *args[1], timeout=120)
    assert cp.returncode == 0, (cp.stdout, cp.stderr)
    return json.loads((out / "probe.json").read_text())


def test_egress_skips_the_host_its_loopback_and_the_metadata_service(tmp_path, host_like):
    """Finding 6: a RUN step had the host's network as uid 0: its loopback
    services, an abstract unix socket, 169.254.169.254. The sandbox's one
    way out is slirp4netns, filtered inside a namespace root cannot
    reconfigure: the internet answers, the host does not."""
    host, listeners, abstract, name = host_like
    ports = {a: s.getsockname()[1] for a, s in listeners.items()}
    found = confined_in(host, tmp_path, [], [
        "--tcp", f"10.0.2.2:{ports['127.0.0.1']}", "--tcp", f"127.0.0.1:{ports['127.0.0.1']}",
        "--tcp", f"169.254.169.254:{ports['169.254.169.254']}", "--tcp", f"198.51.100.2:{ports['198.51.100.2']}",
        "--tcp", f"198.51.100.1:{ports['198.51.100.1']}", "--abstract", name])
    assert found["reached"] == [f"tcp 198.51.100.1:{ports['198.51.100.1']}"], found
    assert accepted(listeners["198.51.100.1"])
    assert not any(accepted(listeners[a]) for a in ("127.0.0.1", "169.254.169.254", "198.51.100.2"))
    assert not accepted(abstract)


def test_root_inside_cannot_change_its_network_and_deny_adds_networks(tmp_path, host_like):
    """The firewall belongs to the host's root: root inside can neither
    flush it nor take the tap down. sandbox_deny= (confine --deny) keeps
    an operator's own networks out as well."""
    host, listeners, _abstract, _name = host_like
    out = tmp_path / "probe-out"
    out.mkdir()
    cp = host.run("env", f"PYTHONPATH={ROOT}", "/usr/bin/python3", "-m", "sandbox.confine", "--", "/bin/sh", "-c",
                  "nft flush ruleset 2>/dev/null && echo flushed; ip link set tap0 down 2>/dev/null && echo down;"
                  " ip route del default 2>/dev/null && echo unrouted; echo done", timeout=120)
    assert cp.returncode == 0 and cp.stdout.split() == ["done"], (cp.stdout, cp.stderr)
    port = listeners["198.51.100.1"].getsockname()[1]
    found = confined_in(host, tmp_path, ["--deny", "198.51.100.0/24"], ["--tcp", f"198.51.100.1:{port}"])
    assert found["reached"] == [] and not accepted(listeners["198.51.100.1"]), found
    cp = host.run("env", f"PYTHONPATH={ROOT}", "/usr/bin/python3", "-m", "sandbox.confine", "--deny", "not-a-net",
                  "--", "true")
    assert cp.returncode != 0 and "sandbox_deny: 'not-a-net' is not an address or a CIDR" in cp.stderr, cp.stderr


def test_the_hosts_network_namespaces_stay_whole(tmp_path):
    """Run from the host's own mount namespace, as build.sh runs it, the
    sandbox leaves the host's named network namespaces as they were:
    slirp4netns's own sandbox made only its root private before detaching
    the old one, and that unmounted every /run/netns/* of the host (a boot
    test's namespace, an operator's containers) for as long as a build ran."""
    ns = netns.Netns("sbx", "bystander")
    try:
        cp = sh(tmp_path, "echo done")
        assert cp.returncode == 0 and cp.stdout.split() == ["done"], (cp.stdout, cp.stderr)
        assert f"/run/netns/{ns.name}" in harness.mount_points(), f"/run/netns/{ns.name} unmounted"
        assert ns.run("true").returncode == 0
    finally:
        ns.close()


def test_without_subordinate_ids_it_refuses_naming_the_fix(tmp_path):
    """No range for e2b-build: confine refuses, naming the files and make deps."""
    sub = tmp_path / "subuid"
    sub.write_text("someone:100000:65536\n")
    from sandbox import ids
    with pytest.raises(ids.IdError) as e:
        ids.slots(uid_path=str(sub), gid_path=str(sub))
    assert "give the user e2b-build no range of 65536 ids" in str(e.value) and "make deps" in str(e.value)
