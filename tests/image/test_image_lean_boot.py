"""A lean boot (os-image/README.md, "A lean boot"), read from the built
e2b-rt tree: what the image masks, skips and leaves out of udev's coldplug
each hides only what a sandbox does not use. The boot test
(tests/boot/checks.py) checks the same decisions in a running guest.
"""
import fnmatch
import os
import re
import subprocess

import testimages
from image_helpers import built, tree, unit, words  # noqa: F401  (fixtures are used by name)
import pytest  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build


def test_lean_boot_masks(tree):
    """The units os-image/README.md masks are masked in the image (links to
    /dev/null), and each names a unit the image has: a mask of a unit that
    is gone (renamed upstream) would hide nothing."""
    names = testimages.masked()
    assert len(names) >= 11, names
    for name in names:
        link = tree / "etc/systemd/system" / name
        assert link.is_symlink() and os.readlink(link) == "/dev/null", link
        assert (tree / "usr/lib/systemd/system" / name).is_file(), f"{name}: no such unit in the image"
    cp = subprocess.run(["systemctl", f"--root={tree}", "is-enabled", *names],
                        capture_output=True, text=True, timeout=30)
    assert cp.stdout.split() == ["masked"] * len(names), (names, cp.stdout, cp.stderr)
    # /run/nologin: systemd-user-sessions (masked) would remove it.
    link = tree / "etc/tmpfiles.d/systemd-nologin.conf"
    assert link.is_symlink() and os.readlink(link) == "/dev/null", link
    assert (tree / "usr/lib/tmpfiles.d/systemd-nologin.conf").is_file(), "no systemd-nologin.conf to shadow"
    # The generators it masks: each link shadows one the image has.
    generators = testimages.masked("system-generators")
    assert len(generators) >= 6, generators
    for name in generators:
        link = tree / "etc/systemd/system-generators" / name
        assert link.is_symlink() and os.readlink(link) == "/dev/null", link
        assert (tree / "usr/lib/systemd/system-generators" / name).is_file(), f"{name}: no such generator in the image"
    # With the SysV generator masked, an init script starts nothing: every
    # one the packages ship has a unit of its own name (or a mask of it).
    assert "systemd-sysv-generator" in generators
    scripts = [p.name for p in (tree / "etc/init.d").iterdir() if p.name not in ("README", "skeleton")]
    assert scripts, "no init scripts: the check below would pass on nothing"
    no_unit = [n for n in scripts if not any((tree / d / f"{n}.service").is_symlink()
                                            or (tree / d / f"{n}.service").exists()
                                            for d in ("etc/systemd/system", "usr/lib/systemd/system"))]
    assert not no_unit, f"init scripts without a unit, which the masked SysV generator would have started: {no_unit}"


def test_remount_fs_runs_only_with_work(tree):
    """systemd-remount-fs starts only with an /etc/fstab or a read-only root:
    without an fstab it acts only on SYSTEMD_REMOUNT_ROOT_RW, and of the
    generators that run, none sets that."""
    dropin = tree / "usr/lib/systemd/system/systemd-remount-fs.service.d/10-e2b-only-with-work.conf"
    conditions = [l for l in dropin.read_text().splitlines() if l.startswith("Condition")]
    assert conditions == ["ConditionPathExists=|/etc/fstab", "ConditionPathIsReadWrite=|!/"], conditions
    binary = (tree / "usr/lib/systemd/systemd-remount-fs").read_bytes()
    assert b"/etc/fstab" in binary and b"SYSTEMD_REMOUNT_ROOT_RW" in binary
    assert words(unit(tree, "systemd-remount-fs.service"), "Service", "ExecStart") == ["/usr/lib/systemd/systemd-remount-fs"]
    masked = set(testimages.masked("system-generators"))
    setting = [g.name for g in (tree / "usr/lib/systemd/system-generators").iterdir()
               if g.name not in masked and b"SYSTEMD_REMOUNT_ROOT_RW" in g.read_bytes()]
    assert not setting, setting
    assert "systemd-gpt-auto-generator" in masked
    assert not (tree / "etc/fstab").exists(), "the image has an fstab: the unit now runs on every boot"


def test_logind_starts_with_a_power_button_or_a_client(tree):
    """systemd-logind is not in the boot's transaction: udev starts it for a
    power button (an input device 70-power-switch.rules tags), and D-Bus
    for a client. No PAM stack needs it at boot: the image has no
    pam_systemd, and the one stack that names it does so as `-session`
    (skipped when the module is absent)."""
    for d in ("usr/lib", "etc"):
        for wants in (tree / d / "systemd/system").glob("*.wants"):
            assert not (wants / "systemd-logind.service").exists(), f"{wants}: logind starts on every boot"
    assert not list((tree / "usr/lib/systemd/system").glob("systemd-logind.service.d/*e2b*")), \
        "a condition on logind would also refuse D-Bus activation (clients wait 25 s)"
    rule = (tree / "usr/lib/udev/rules.d/71-e2b-logind-power-switch.rules").read_text()
    lines = [l for l in rule.splitlines() if l and not l.startswith("#")]
    assert lines == ['ACTION!="remove", SUBSYSTEM=="input", TAG=="power-switch", TAG+="systemd", '
                     'ENV{SYSTEMD_WANTS}+="systemd-logind.service"'], lines
    tagger = (tree / "usr/lib/udev/rules.d/70-power-switch.rules").read_text()
    assert 'TAG+="power-switch"' in tagger and "ID_INPUT_KEY" in tagger
    assert "SystemdService=dbus-org.freedesktop.login1.service" in \
        (tree / "usr/share/dbus-1/system-services/org.freedesktop.login1.service").read_text()
    assert (tree / "usr/lib/systemd/system/dbus-org.freedesktop.login1.service").resolve().name == "systemd-logind.service"
    modules = sorted(p.name for p in tree.glob("usr/lib/*/security/*.so"))
    assert "pam_unix.so" in modules and "pam_systemd.so" not in modules, modules
    naming = {}
    for f in sorted((tree / "etc/pam.d").iterdir()):
        found = [l.split() for l in f.read_text().splitlines() if "pam_systemd" in l and not l.lstrip().startswith("#")]
        if found:
            naming[f.name] = found
    assert all(l[0].startswith("-") for found in naming.values() for l in found), naming


def test_early_dev_tmpfiles_do_all_of_the_masked_second_run(tree):
    """systemd-tmpfiles-setup-dev is masked because -early runs the same
    command with --graceful, which only skips lines naming a user or group
    the image does not have: every /dev line's user and group exists, and the
    two units differ in nothing else."""
    early = words(unit(tree, "systemd-tmpfiles-setup-dev-early.service"), "Service", "ExecStart")
    second = words(unit(tree, "systemd-tmpfiles-setup-dev.service"), "Service", "ExecStart")
    assert second and early == second + ["--graceful"], (early, second)
    users = {l.split(":")[0] for l in (tree / "etc/passwd").read_text().splitlines()}
    groups = {l.split(":")[0] for l in (tree / "etc/group").read_text().splitlines()}
    dev_lines = []
    for d in ("usr/lib/tmpfiles.d", "etc/tmpfiles.d"):
        for f in sorted((tree / d).glob("*.conf")):
            if f.is_symlink() and os.readlink(f) == "/dev/null":
                continue
            for line in f.read_text().splitlines():
                fields = line.split()
                if len(fields) >= 5 and not line.startswith("#") and fields[1].startswith("/dev"):
                    dev_lines.append((f.name, fields[1], fields[3], fields[4]))
    assert len(dev_lines) >= 5, dev_lines
    unknown = [l for l in dev_lines if l[2] not in users | {"-"} or l[3] not in groups | {"-"}]
    assert not unknown, unknown


COLDPLUG = "usr/lib/systemd/system/systemd-udev-trigger.service.d/10-e2b-coldplug.conf"


def coldplug_lines(tree):
    """The drop-in's udevadm trigger lines, each as {option: [values]}."""
    out = []
    for line in (tree / COLDPLUG).read_text().splitlines():
        if line.startswith("ExecStart=-udevadm trigger "):
            opts = {}
            for arg in line.split()[2:]:
                key, _, value = arg.partition("=")
                opts.setdefault(key, []).append(value)
            out.append(opts)
    return out


def udev_rules(tree):
    """Every rule line of the image's udev rules, continuations joined; a file
    in /etc/udev/rules.d shadows one of its name in /usr/lib (a link to
    /dev/null masks it), as udev reads them."""
    files = {}
    for d in ("usr/lib/udev/rules.d", "etc/udev/rules.d"):
        for f in (tree / d).glob("*.rules"):
            files[f.name] = f
    lines = []
    for name, f in sorted(files.items()):
        if f.is_symlink() and os.readlink(f) == "/dev/null":
            continue
        text = f.read_text(errors="replace").replace("\\\n", " ")
        lines += [(f.name, l.strip()) for l in text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    return lines


def test_masked_udev_rules(tree):
    """The rules os-image/README.md masks each shadow a file of the image,
    and do nothing a sandbox uses: 70-memory.rules only imports the
    emulated DIMMs' SMBIOS entries (dmi_memory_id, a process on every boot)."""
    def masks(d):
        return sorted(p.name for p in d.glob("*.rules") if p.is_symlink() and os.readlink(p) == "/dev/null")
    names = masks(tree / "etc/udev/rules.d")
    assert names and names == masks(testimages.ROOT / "os-image/mkosi.extra/etc/udev/rules.d"), names
    for name in names:
        assert (tree / "usr/lib/udev/rules.d" / name).is_file(), f"{name}: no such rules file in the image"
    assert "70-memory.rules" in names, names
    text = (tree / "usr/lib/udev/rules.d/70-memory.rules").read_text()
    actions = re.findall(r'(?:IMPORT\{[a-z]+\}|RUN|PROGRAM|ENV\{[^}]+\}|TAG|SYMLINK|OWNER|GROUP|MODE|ATTR\{[^}]+\})\+?=[^=]', text)
    assert actions == ['IMPORT{program}="'], actions
    assert 'IMPORT{program}="dmi_memory_id"' in text


def test_coldplug_leaves_out_only_what_no_rule_acts_on(tree):
    """The narrower coldplug (os-image/README.md, "A lean boot") replays
    modules only where a rule names them, and leaves out subsystems no rule in
    the image names, and the virtual consoles, whose one rule sets an owner
    that their 0600 mode makes moot. A package that brings a rule for
    something left out fails here, so the list is looked at again."""
    modules, devices, ttys = coldplug_lines(tree)
    assert modules["--type"] == ["subsystems"] and modules["--subsystem-match"] == ["module"], modules
    assert devices["--type"] == ["devices"] and "--subsystem-match" not in devices, devices
    assert ttys["--type"] == ["devices"] and ttys["--subsystem-match"] == ["tty"], ttys
    rules = udev_rules(tree)
    assert len(rules) > 300, len(rules)
    named = {m for _, l in rules for m in re.findall(r'KERNEL=="([^"]+)"', l) if 'SUBSYSTEM=="module"' in l}
    assert named and named <= set(modules["--sysname-match"]), (named, modules["--sysname-match"])
    left_out = set(devices["--subsystem-nomatch"]) - {"tty"}
    assert "bdi" in left_out, left_out
    # SUBSYSTEMS== matches a parent, read from sysfs whether or not it was
    # replayed. The consoles' rule is looked at below; a backing device's
    # only rule sets an NFS mount's read-ahead, and none exists at coldplug.
    def moot(sub, line):
        return (sub == "vc" and line.endswith('GROUP="tty"')) or \
            (sub == "bdi" and 'PROGRAM="/usr/libexec/nfsrahead %k"' in line)
    naming = [(f, l) for f, l in rules for sub in re.findall(r'(?<![A-Z])SUBSYSTEM=="([^"]+)"', l)
              if set(sub.split("|")) & left_out and not moot(sub, l)]
    assert not naming, naming
    # The virtual consoles tty1-tty63: none of the tty line's names match
    # them, all the other ttys the kernel makes do; their rules only set the
    # group of a 0600 node.
    names = ttys["--sysname-match"]
    for name in ("tty1", "tty5", "tty63"):
        assert not any(fnmatch.fnmatchcase(name, p) for p in names), (name, names)
    for name in ("tty", "tty0", "ttyS0", "ttyAMA0", "hvc0", "console", "ptmx", "ttyprintk", "xvc0"):
        assert any(fnmatch.fnmatchcase(name, p) for p in names), (name, names)
    def for_consoles(line):
        if 'SUBSYSTEM=="tty"' not in line:
            return False
        kernel = re.findall(r'KERNEL=="([^"]+)"', line)
        return not kernel or any(fnmatch.fnmatchcase("tty5", k) for k in kernel[0].split("|"))
    vt = [l for _, l in rules if for_consoles(l)]
    assert vt and all(re.sub(r'^SUBSYSTEM=="tty", KERNEL=="[^"]+", ', "", l) == 'GROUP="tty", MODE="0600"'
                      for l in vt), vt
    # systemd's own trigger line is what the drop-in replaces (ExecStart= first).
    text = (tree / COLDPLUG).read_text().splitlines()
    assert "ExecStart=" in text and text.index("ExecStart=") < min(i for i, l in enumerate(text) if l.startswith("ExecStart=-"))
    assert "--type=all" in (tree / "usr/lib/systemd/system/systemd-udev-trigger.service").read_text()
