"""Static checks of the e2b-ci units, preset and lists, and of the
code-interpreter pin in recipes/ (the built image is checked in test_image.py)."""
import configparser
import json
import re

from ci_helpers import FLAVOR_DIR, ROOT, run

UNITS = ROOT / "units"


def unit(name):
    # systemd units allow repeated keys; keep the last value, like systemd for scalars.
    p = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    p.optionxform = str
    p.read(UNITS / name)
    return p


def words(value):
    return value.split()


def test_jupyter_unit():
    u = unit("jupyter.service")
    assert "envd-guard.service" in words(u["Unit"]["Requires"])
    assert "envd-guard.service" in words(u["Unit"]["After"])
    s = u["Service"]
    assert s["User"] == "user"
    assert "-m jupyter_server " in s["ExecStart"]
    assert "--ServerApp.ip" not in s["ExecStart"], "the bind address lives in the config file only"
    assert s["OOMPolicy"] == "continue"
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_code_interpreter_unit_is_ordered_after_jupyter_and_the_guard():
    u = unit("code-interpreter.service")
    for key in ("Requires", "After"):
        assert {"envd-guard.service", "jupyter.service"} <= set(words(u["Unit"][key]))
    assert u["Unit"]["PartOf"] == "jupyter.service"
    s = u["Service"]
    assert s["User"] == "user"
    assert re.search(r"uvicorn main:app --host 127\.0\.0\.1 --port 49999 ", s["ExecStart"])
    assert s["WorkingDirectory"] == "/usr/lib/e2b-code-interpreter/server"
    assert s["NoNewPrivileges"] == "yes" and s["ProtectSystem"] == "strict"
    assert s["IPAddressDeny"] == "any" and s["IPAddressAllow"] == "localhost"
    assert "8888/api/status" in s["ExecStartPre"]


def test_units_are_listed_and_enabled_by_the_flavor():
    listed = [l.strip() for l in (FLAVOR_DIR / "units").read_text().splitlines()
              if l.strip() and not l.startswith("#")]
    assert listed == ["jupyter.service", "code-interpreter.service"]
    preset = (FLAVOR_DIR / "mkosi.extra/usr/lib/systemd/system-preset/20-e2b-ci.preset").read_text()
    assert "enable jupyter.service" in preset and "enable code-interpreter.service" in preset


def code_interpreter_stanza(release_tools, tmp_path):
    """The [code-interpreter] stanza, read by pinfetch. Until it is pinned
    (its file says "NOT PINNED YET"), pinfetch refuses it for exactly the
    missing sha256; the rest of it is read by adding a placeholder sha256 to a
    copy, so the one parser still checks every other line."""
    lock = ROOT / "recipes/code-interpreter.lock"
    cp = release_tools.run("pinfetch", "--lock", lock, "--name", "code-interpreter", "--json")
    if cp.returncode == 0:
        return json.loads(cp.stdout), True
    text = lock.read_text()
    assert "NOT PINNED YET" in text and '[code-interpreter]: missing "sha256"' in cp.stderr, cp.stderr
    assert "code-interpreter.lock:" in cp.stderr, cp.stderr
    probe = tmp_path / "code-interpreter.lock"
    probe.write_text(text + "sha256 = " + "0" * 64 + "\n")
    return release_tools.lock_stanza(probe, "code-interpreter"), False


def test_code_interpreter_lock_names_a_commit_archive(release_tools, tmp_path):
    st, _ = code_interpreter_stanza(release_tools, tmp_path)
    commit = st["version"]
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert st["url"] == f"https://codeload.github.com/e2b-dev/code-interpreter/tar.gz/{commit}"
    listed = (FLAVOR_DIR / "pins").read_text()
    assert re.search(r"^code-interpreter\.lock code-interpreter /usr/lib/e2b-code-interpreter/source\.tar\.gz 0644$",
                     listed, re.M)


def test_unpinned_archive_stops_the_build_naming_the_lock(release_tools, tmp_path):
    """Until a maintainer runs `pinfetch --print-pin` with network access, the
    lock has no sha256 (none was made up): pinfetch refuses it, naming it."""
    lock = ROOT / "recipes/code-interpreter.lock"
    st, pinned = code_interpreter_stanza(release_tools, tmp_path)
    cp = release_tools.run("pinfetch", "--lock", lock, "--name", "code-interpreter",
                           "--output", tmp_path / "ci.tgz", "--no-cache", "--offline")
    if pinned:
        assert re.fullmatch(r"[0-9a-f]{64}", st["sha256"])
        assert cp.returncode == 1  # offline, empty cache: not fetched, but the lock parses
    else:
        assert "pinfetch --print-pin" in lock.read_text()
        assert cp.returncode == 2
        assert "code-interpreter.lock" in cp.stderr and "sha256" in cp.stderr
    assert not (tmp_path / "ci.tgz").exists()
