"""The top Makefile: parsing it runs no pkg-config (so `make deps` works on a
bare machine, before pkg-config is installed), and the knobs keep their
documented names and defaults."""
import os
import shutil
import subprocess

from harness import ROOT


def make(*args, path=None):
    env = dict(os.environ)
    if path:
        env["PATH"] = path
    return subprocess.run([shutil.which("make"), "--no-print-directory", "-C", str(ROOT), *args],
                          capture_output=True, text=True, timeout=120, env=env)


def bare_path(tmp_path):
    """A PATH with what make and the recipes need, and a pkg-config that
    records every call (a test stand-in), so a call cannot go unnoticed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("bash", "sh", "cat", "env", "uname", "id"):
        if shutil.which(tool):
            (bin_dir / tool).symlink_to(shutil.which(tool))
    calls = tmp_path / "pkg-config-calls"
    spy = bin_dir / "pkg-config"
    spy.write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexit 1\n')
    spy.chmod(0o755)
    return str(bin_dir), calls


def test_deps_parses_without_pkg_config(tmp_path):
    path, calls = bare_path(tmp_path)
    cp = make("-n", "deps", path=path)
    assert cp.returncode == 0 and cp.stdout.strip() == "bash mk/deps.sh", cp.stdout + cp.stderr
    assert cp.stderr == ""
    assert not calls.exists(), calls.read_text()

    # Control: the spy does see the calls a compile needs.
    make("-n", "-B", "build=" + str(tmp_path / "build"), str(tmp_path / "build/envd-guard"), path=path)
    assert "--cflags" in calls.read_text()


def test_knobs(tmp_path):
    def value(var, *args):
        cp = make("-s", f"print-{var}", *args)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout.strip()

    assert (value("flavor"), value("release"), value("build"), value("fuzz_seconds")) == \
        ("e2b-rt", "trixie", "build", "300")
    assert value("build", "build=/tmp/x") == "/tmp/x"
    # The upper-case names of old still work.
    assert value("build", "BUILD=/tmp/y") == "/tmp/y"
    assert value("fuzz_seconds", "FUZZ_SECONDS=7") == "7"
    # pydeps and pip_index reach build.sh like every other knob.
    env = value("IMAGE_ENV", "pydeps=pip", "pip_index=http://127.0.0.1:9/simple").split()  # echo drops quotes
    assert {"PYDEPS=pip", "PIP_INDEX=http://127.0.0.1:9/simple", "RELEASE=trixie", "FLAVOR=e2b-rt",
            "PYTHON=/usr/bin/python3"} <= set(env)
