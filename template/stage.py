#!/usr/bin/python3
"""Stage a template (build/e2b-template's JSON) as a mkosi extra tree:

  usr/lib/e2b-template-build/files.d/NNN    the template's files, installed by template.postinst
  usr/lib/e2b-template-build/files          "NNN DEST OWNER GROUP MODE" lines, one a file
  usr/lib/e2b-template-build/run/NNN        the build commands, in order (template.postinst)
  etc/e2b/template.env                      the env, for the start unit
  etc/profile.d/e2b-template-env.sh         the env, for envd's commands (`bash -l -c`)
  usr/lib/e2b-template/start                the start command, run by
  usr/lib/systemd/system/e2b-template.service   as `user`, after envd, restarted
  usr/lib/systemd/system-preset/05-e2b-template.preset

A file may not land where the image's guard, envd or units live, or where
the dynamic linker is configured: those are not the template's to replace
(sandbox/guard_record.py checks what the build commands did to them).
"""
import argparse
import json
import os
import shutil
import sys

from sandbox.guard_record import GUARD_FILES

BUILD = "usr/lib/e2b-template-build"
UNIT = "e2b-template.service"
# Destinations a template's files may not write, each with its rule: what
# decides how the guard and envd start (sandbox/guard_record.py checks the
# same after the build commands; this refuses a file early, by name).
PROTECTED = (
    ("/etc/e2b/", "the guard's configuration"),
    ("/usr/lib/e2b-template/", "the template's own start unit, which the build writes"),
    ("/usr/lib/e2b-template-build/", "the template's staging"),
    ("/etc/systemd/", "systemd's configuration, units, generators and presets"),
    ("/usr/lib/systemd/", "systemd's units, generators and presets"),
    ("/lib/systemd/", "systemd's units, generators and presets"),
    ("/usr/local/lib/systemd/", "systemd's units, generators and presets"),
    ("/run/", "the run-time directory, a tmpfs at boot (systemd's units there included)"),
    ("/etc/ld.so.preload", "the dynamic linker's configuration (a preloaded library runs in the guard)"),
    ("/etc/ld.so.conf", "the dynamic linker's configuration (its library search path)"),
    ("/etc/ld.so.conf.d/", "the dynamic linker's configuration (its library search path)"),
)
# The guard's own files (the record's list; /etc/e2b is a prefix above), nft,
# and the sandbox user's sudoers rule.
PROTECTED_FILES = tuple("/" + p for p in GUARD_FILES if p != "etc/e2b") + ("/etc/sudoers.d/user", "/usr/sbin/nft")


def unit(t: dict) -> str:
    return f"""# The template {t['name']}'s start command (template.conf `start =`), written by
# template/stage.py: as `user`, after envd, restarted by systemd.
[Unit]
Description=Template {t['name']}: start command
After=envd.service network.target
Wants=envd.service
# 60 s, not 10: under a slow (1-vCPU, emulated) guest one start of a command
# that exits at once can take over a second beside RestartSec=1, and five
# starts then never fit in 10 s, so the loop never counted as failed.
StartLimitIntervalSec=60
StartLimitBurst=5

[Service]
User=user
Group=user
WorkingDirectory=/home/user
Environment=HOME=/home/user USER=user
EnvironmentFile=-/etc/e2b/template.env
ExecStart=/usr/lib/e2b-template/start
Restart={t['restart']}
RestartSec=1

[Install]
WantedBy=multi-user.target
"""


def protected(dest: str) -> str | None:
    """The rule DEST falls under, or None."""
    if dest in PROTECTED_FILES:
        return "the guard's, envd's and the relays' own files"
    for prefix, rule in PROTECTED:
        if dest.startswith(prefix) or dest + "/" == prefix or dest == prefix.rstrip("/"):
            return rule
    return None


def write(tree: str, rel: str, text: str, mode: int = 0o644) -> None:
    path = os.path.join(tree, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, mode)


def stage(t: dict, tree: str, conf: str) -> None:
    files = []
    for f in t["files"]:
        rule = protected(f["dest"])
        if rule:
            raise ValueError(f"{conf}:{f['line']}: key 'file': {f['dest']} belongs to the image's guard, envd or "
                             f"units ({rule}) and is not a template's to replace; choose another destination")
        n = f"{len(files) + 1:03d}"
        os.makedirs(os.path.join(tree, BUILD, "files.d"), exist_ok=True)
        shutil.copyfile(f["src"], os.path.join(tree, BUILD, "files.d", n))
        files.append(f"{n} {f['dest']} {f['owner']} {f['group']} {f['mode']}\n")
    write(tree, f"{BUILD}/files", "".join(files))
    os.makedirs(os.path.join(tree, BUILD, "run"), exist_ok=True)
    for i, cmd in enumerate(t["run"], 1):
        write(tree, f"{BUILD}/run/{i:03d}", f"# run = {cmd}\n{cmd}\n", 0o755)
    if t["env"]:
        write(tree, "etc/e2b/template.env", "".join(f"{e['name']}={e['value']}\n" for e in t["env"]))
        # Values carry no quotes, '\', '$' or '`' (the parser refuses them).
        write(tree, "etc/profile.d/e2b-template-env.sh",
              "".join(f"export {e['name']}=\"{e['value']}\"\n" for e in t["env"]))
    if t["start"]:
        write(tree, "usr/lib/e2b-template/start", f"#!/bin/sh\n# template.conf start =\n{t['start']}\n", 0o755)
        write(tree, f"usr/lib/systemd/system/{UNIT}", unit(t))
        write(tree, "usr/lib/systemd/system-preset/05-e2b-template.preset", f"enable {UNIT}\n")


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.stage")
    ap.add_argument("--template", required=True, help="build/e2b-template's JSON")
    ap.add_argument("--tree", required=True)
    ap.add_argument("--conf", default="template.conf", help="the template.conf path, for messages")
    a = ap.parse_args(argv)
    with open(a.template, encoding="utf-8") as f:
        t = json.load(f)
    try:
        stage(t, a.tree, a.conf)
    except (ValueError, OSError) as e:
        print(f"template: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
