"""Pool templates for a user's template (`make template=DIR` -> out/<name>/):
the warmup waits for envd, then for the template's ready check within its
timeout, both read from the image's labels (out/<name>/manifest.json, the
same keys as its OCI labels; os-image/labels.py). If the start command's unit
fails (a command that exits at once: systemd gives up after five starts in
60 s), the warmup stops at once and says so; if the check never passes, it
says which check and how long it waited. Either way the exit is 1 and the
pool destroys the clone.
"""
from __future__ import annotations

import json
import pathlib
import shlex

PREFIX = "org.e2b-images."
UNIT = "e2b-template.service"
# envd first, with the contract's budget (as ci/templates.py's ENVD_WARMUP).
ENVD_WAIT = ("ok=0; for i in $(seq 1 200); do curl -sf -o /dev/null http://127.0.0.1:49983/health && "
             "{ ok=1; break; }; sleep 0.05; done; [ $ok = 1 ] || { echo 'warmup: envd never answered' >&2; exit 1; }; ")


def ready_command(check: str) -> str:
    """The shell test for one ready check ("port 3000", "url http://…", …)."""
    kind, _, arg = check.partition(" ")
    q = shlex.quote(arg)
    if kind == "port":
        return f"ss -Hltn 'sport = :{int(arg)}' | grep -q ."
    if kind == "url":
        return f"curl -sf -o /dev/null --max-time 2 {q}"
    if kind == "process":
        return f"grep -qxF {q} /proc/[0-9]*/comm 2>/dev/null"
    if kind == "file":
        return f"test -e {q}"
    if kind == "command":
        return f"sh -c {q}"
    raise ValueError(f"unknown ready check {check!r}")


def warmup(name: str, check: str, timeout: int) -> list:
    test = ready_command(check)
    why = shlex.quote(f"warmup: template {name}: ready check '{check}' did not pass within {timeout}s")
    failed = shlex.quote(f"warmup: template {name}: its start command failed ({UNIT}):")
    script = (ENVD_WAIT + f"end=$(($(date +%s) + {timeout})); while :; do "
              f"if {test}; then exit 0; fi; "
              f"if systemctl -q is-failed {UNIT}; then echo {failed} "
              f"$(systemctl show -p Result -p ExecMainStatus -p NRestarts {UNIT} | tr '\\n' ' ') >&2; exit 1; fi; "
              f"[ $(date +%s) -lt $end ] || {{ echo {why} >&2; exit 1; }}; sleep 0.2; done")
    return ["sh", "-c", script]


def size_of(memory_mb: int) -> str:
    return "small" if memory_mb <= 512 else "medium" if memory_mb <= 2048 else "large"


def init_args(labels: dict) -> list:
    """envd's /init defaults for an E2B template (e2b-hostlink's --user and
    --workdir): the user and workdir its steps left, as E2B's build sets
    them; none for a flavor or a template.conf template."""
    out = []
    for key, opt in (("envd-user", "--user"), ("envd-workdir", "--workdir")):
        if labels.get(PREFIX + key):
            out += [opt, labels[PREFIX + key]]
    return out


def template_spec(out_dir: pathlib.Path, name: str, flavors: dict) -> dict | None:
    """size, warm and warmup for out/<name>/ when it is a template built on
    one of FLAVORS; None when it is not one."""
    manifest = out_dir / name / "manifest.json"
    if not manifest.is_file():
        return None
    labels = json.loads(manifest.read_text()).get("labels", {})
    flavor = labels.get(PREFIX + "flavor")
    if flavor not in flavors or labels.get(PREFIX + "name") != name or name in flavors:
        return None
    spec = {"size": size_of(int(labels[PREFIX + "memory-mb"])), "warm": flavors[flavor]["warm"], "flavor": flavor,
            "init": init_args(labels)}
    check = labels.get(PREFIX + "ready")
    if check:
        spec["warmup"] = warmup(name, check, int(labels[PREFIX + "ready-timeout"]))
    else:
        spec["warmup"] = list(flavors[flavor]["warmup"])
    return spec
