#!/usr/bin/python3
"""Stage an E2B Template JSON (build/e2b-template's normal form of
DIR/e2b.template.json) as a mkosi extra tree, on the build machine, before
mkosi runs:

  usr/lib/e2b-template-build/steps.json     the steps, for template/e2b/steps.py (template.postinst)
  usr/lib/e2b-template-build/copy/NAME/NNN/ step NNN's files (a COPY) of template NAME, as the SDK's upload has them
  usr/lib/systemd/system/e2b-template.service, its preset   when there is a start command

Every COPY's files are read from DIR as the SDK reads them and must hash to
the step's filesHash (template/e2b/copyfiles.py). Also writes --labels: the
template's name and ready check for os-image/labels.py, in the keys
build/e2b-template gives a template.conf template.
"""
import argparse
import json
import os
import sys

from sandbox.termsafe import escape
from template.e2b import copyfiles
from template.stage import BUILD, UNIT, protected, write

# E2B polls the ready command every 2 s for 10 minutes; without one, a start
# command gets 20 s (its GetDefaultReadyCommand).
READY_TIMEOUT = 600
DEFAULT_READY = "sleep 20"


def unit(name: str) -> str:
    return f"""# The template {name}'s start command (E2B's startCmd), written by
# template/e2b/stage.py. E2B starts it once, after envd, and does not restart
# it; /usr/lib/e2b-template/start (template/e2b/steps.py) runs it as the
# user, in the workdir and with the ENVs the steps left.
[Unit]
Description=Template {name}: start command
After=envd.service network.target
Wants=envd.service

[Service]
ExecStart=/usr/lib/e2b-template/start
Restart=no

[Install]
WantedBy=multi-user.target
"""


def stage_one(t: dict, folder: str, tree: str) -> dict:
    """One template's steps, its COPY files checked and staged."""
    folder = os.path.realpath(folder)
    ignore = copyfiles.IgnoreMatcher.of_folder(folder)
    steps = []
    for step in t["steps"]:
        step = dict(step)
        if step["type"] == "COPY":
            dest = step["args"][1]
            rule = protected(dest) if dest.startswith("/") else None
            if rule and not dest.startswith(("/etc/systemd/", "/usr/lib/systemd/", "/lib/systemd/")):
                raise copyfiles.CopyError(f"step {step['index']}: COPY to {dest}: it belongs to the image's guard, "
                                         f"envd or units ({rule}) and is not a template's to replace")
            rels, step["resolveSymlinks"] = copyfiles.read_step(folder, step, ignore)
            n = f"{t['name']}/{step['index']:04d}"
            entry = copyfiles.stage_step(folder, step, rels, os.path.join(tree, BUILD.lstrip("/"), "copy", n))
            step["staged"] = "/" + os.path.relpath(entry, tree)
        steps.append(step)
    start = None
    if t["start_cmd"] or t["ready_cmd"]:
        # E2B: a template that sets either command replaces its base's pair.
        start = {"start_cmd": t["start_cmd"], "ready_cmd": t["ready_cmd"] or (DEFAULT_READY if t["start_cmd"] else None)}
    return {"name": t["name"], "steps": steps, "start": start}


def stage(chain: list, tree: str, env: dict | None = None, meta: dict | None = None) -> dict:
    """CHAIN: (normal form, folder) pairs, the base first (fromTemplate
    naming another local template), the template being built last. Each
    builds on the one before, as E2B's build does: its context carried on,
    USER reset to `user`, and the last start/ready pair set is the one.
    ENV: the ENVs the first steps start with (a fromImage base's config Env,
    as E2B's build takes it).
    META: the template's e2b.toml values (template/e2b/dockerfile.py --meta
    beside a Dockerfile, template/e2b/e2btoml.py --meta beside the JSON), its
    cpu_count and memory_mb the sandbox's vcpu and memory_mb."""
    templates = []
    for t, folder in chain:
        try:
            templates.append(stage_one(t, folder, tree))
        except copyfiles.CopyError as e:
            what = f"{folder}/e2b.template.json" if os.path.lexists(os.path.join(folder, "e2b.template.json")) \
                else f"{folder} (its Dockerfile's Template JSON)"
            raise copyfiles.CopyError(f"{what}: {e}") from None
    write(tree, f"{BUILD.lstrip('/')}/steps.json", json.dumps({"templates": templates, "env": env or {}}, indent=1) + "\n")
    start = next((t["start"] for t in reversed(templates) if t["start"]), None)
    name = chain[-1][0]["name"]
    if start and start["start_cmd"]:
        write(tree, f"usr/lib/systemd/system/{UNIT}", unit(name))
        write(tree, "usr/lib/systemd/system-preset/05-e2b-template.preset", f"enable {UNIT}\n")
    ready = start and start["ready_cmd"]
    meta = meta or {}
    return {"format": "e2b", "name": name, "description": "", "vcpu": meta.get("cpu_count"),
            "memory_mb": meta.get("memory_mb"),
            "ready": "command /usr/lib/e2b-template/ready" if ready else None,
            "ready_timeout": READY_TIMEOUT if ready else None}


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.stage")
    ap.add_argument("--template", action="append", required=True, nargs=2, metavar=("JSON", "FOLDER"),
                    help="build/e2b-template's normal form and the template's folder (COPY sources); "
                         "repeated for a chain of templates, its base first")
    ap.add_argument("--base-env", metavar="JSON", help="template/e2b/pull.py's output: its env starts the steps' ENVs")
    ap.add_argument("--tree", required=True)
    ap.add_argument("--labels", required=True, help="where the label inputs go")
    ap.add_argument("--meta", help="the template's e2b.toml values (dockerfile.py or e2btoml.py --meta)")
    a = ap.parse_args(argv)
    chain = []
    for path, folder in a.template:
        with open(path, encoding="utf-8") as f:
            chain.append((json.load(f), folder))
    env = None
    if a.base_env:
        with open(a.base_env, encoding="utf-8") as f:
            env = json.load(f)["env"]
    try:
        meta = None
        if a.meta:
            with open(a.meta, encoding="utf-8") as f:
                meta = json.load(f)
        labels = stage(chain, a.tree, env, meta)
    except (copyfiles.CopyError, OSError) as e:
        print(escape(f"template: {e}"), file=sys.stderr)
        return 1
    with open(a.labels, "w", encoding="utf-8") as f:
        json.dump(labels, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
