"""sandbox/confine.py, on its own (issue 37): what a root process inside
can and cannot do. The end-to-end tests are a real builder build with a
trojan base (test_builder_hostile.py) and template build commands
(tests/template/test_template_build.py); these pin each property down in
a second: root inside still is root over the tree it is given (the image's
files keep their owners), and over nothing else."""
import os
import pathlib
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def confine(*args, timeout=60):
    return subprocess.run(["/usr/bin/python3", "-m", "sandbox.confine", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT)})


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
    t0 = time.monotonic()
    cp = sh(tmp_path, "(setsid sleep 300 &) ; exit 7")
    assert cp.returncode == 7
    assert time.monotonic() - t0 < 30
    assert "sleep 300" not in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout


def test_bad_arguments_are_named(tmp_path):
    cp = confine("--bind", "relative/path", "--", "true")
    assert cp.returncode != 0 and "relative/path: not an absolute path that exists" in cp.stderr
    cp = confine("--", "/no/such/program")
    assert cp.returncode == 127 and "/no/such/program" in cp.stderr
