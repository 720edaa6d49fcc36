#!/usr/bin/python3
"""Runs an E2B Template JSON's steps in the image, in order, with the meaning
E2B's build gives them (e2b-dev/infra, packages/orchestrator/pkg/template/
build/, at envd-v0.6.13; template/README.md, "E2B's Template JSON"), then
writes how the start and ready commands run.

    python3 -m template.e2b.steps ROOT STEPS_JSON [--cache-in DIR] [--cache-out DIR]
    (STEPS_JSON: a path in the image, read inside ROOT)

--cache-in: the step cache's layers the host found for these steps
(template/e2b/step_cache.py stage), restored in place of running them;
--cache-out: where each step that runs leaves its layer
(template/e2b/layers.py), for step_cache.py store.

Run by template/template.postinst inside mkosi's postinst sandbox, where
`mkosi-chroot` runs a command in the image root. STEPS_JSON is what
template/e2b/stage.py staged: {"templates": [{"name", "steps": [...],
"start": {"start_cmd", "ready_cmd"} | null}, ...], "env": {...}}, the base
first when a template builds on another, with each COPY's files staged in
the image under /usr/lib/e2b-template-build/copy/NAME/NNN/.

The context, as E2B's build keeps it: a user (`user` before the first step,
as E2B's default USER phase leaves it), a workdir (none: a command runs in
the user's home), and the ENVs so far (the base image's Env first).
- RUN [cmd, user?]: `/bin/bash -l -c cmd` as user (the step's, else the
  context's), in the workdir, with HOME, USER, LOGNAME, PATH and the ENVs;
  the context is unchanged.
- COPY [src, dest, owner, mode]: the staged entry to dest (relative: to the
  workdir or home); owner default the context's user; parents made by root.
- ENV [k, v, ...]: each value expanded by bash (variables, not commands)
  with the ENVs so far; WORKDIR [path]: relative to the workdir or /, made
  (the new part owned by the user) when missing; USER [name, sudo?]: made
  when missing (useradd --create-home), with passwordless sudo when "true";
  a numeric uid (USER 1000[:1000], RUN as "1000") is the account that has it.
A failing step stops the build: its index, its type, its command and its
output's last lines.
"""
import argparse
import copy
import json
import os
import shlex
import subprocess
import sys
import threading
from collections import deque

from sandbox import inroot
from sandbox.termsafe import escape
from template.e2b.layers import LayerError, Layers

BUILD = "/usr/lib/e2b-template-build"
OUT_DIR = "usr/lib/e2b-template"
# envd runs under systemd: a command's PATH is systemd's default, and a PATH
# among the ENVs gets it appended (as E2B's build does).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class StepError(Exception):
    pass


def chroot(*argv: str, check: bool = True, capture: bool = True) -> subprocess.CompletedProcess:
    cp = subprocess.run(["mkosi-chroot", *argv], capture_output=capture, text=True)
    if check and cp.returncode != 0:
        raise StepError(f"{' '.join(argv[:3])}: exit status {cp.returncode}: {(cp.stderr or '').strip()[-500:]}")
    return cp


def account(name: str) -> dict:
    """NAME's account: a login name, or a numeric uid (USER 1000, run_cmd(...,
    user="1000")), which getent looks up by uid; the result has its name."""
    cp = chroot("getent", "passwd", name, check=False)
    if cp.returncode != 0 or not cp.stdout.strip():
        if name.isdigit():
            raise StepError(f"no account has uid {name} in the image; make one in a RUN step before it "
                            f"(useradd --create-home --uid {name} NAME, as root) or name the user")
        raise StepError(f"user '{name}' does not exist in the image (a USER step makes one)")
    f = cp.stdout.strip().split("\n")[0].split(":")
    group = chroot("id", "-gn", f[0]).stdout.strip()
    return {"name": f[0], "group": group, "gid": f[3], "home": f[5] or "/"}


def run_env(user: dict, env: dict) -> list:
    """env(1) assignments for a command as user: HOME, USER, LOGNAME, PATH, then the ENVs."""
    out = {"PATH": SYSTEM_PATH, "HOME": user["home"], "USER": user["name"], "LOGNAME": user["name"]}
    for k, v in env.items():
        out[k] = f"{v}:{SYSTEM_PATH}" if k == "PATH" else v
    return [f"{k}={v}" for k, v in out.items()]


def as_user_argv(user: dict, workdir: str, env: dict, command: str, switch: bool = True) -> list:
    """The command, as E2B's envd runs one: bash -l -c, as user (switched to
    from root with setpriv, unless already that user), in workdir."""
    to_user = ["setpriv", f"--reuid={user['name']}", f"--regid={user['group']}", "--init-groups"] if switch else []
    return ["env", "-i", "-C", workdir, *run_env(user, env), *to_user, "/bin/bash", "-l", "-c", command]


def run_step(ctx: dict, step: dict) -> None:
    cmd = step["args"][0]
    # A numeric user is the account of that uid (account()).
    user = account(step["args"][1] if len(step["args"]) > 1 else ctx["user"])
    workdir = ctx["workdir"] or user["home"]
    if chroot("test", "-d", workdir, check=False).returncode != 0:
        raise StepError(f"its working directory {escape(workdir)} does not exist")
    tail = deque(maxlen=20)
    p = subprocess.Popen(["mkosi-chroot", *as_user_argv(user, workdir, ctx["env"], cmd)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def pump():
        for line in p.stdout:
            sys.stderr.buffer.write(line)
            sys.stderr.buffer.flush()
            tail.append(line.decode("utf-8", "replace").rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    p.wait()
    # A step ends when its command does, as on E2B: a process it left in
    # the background may hold the output open, and is not waited for.
    reader.join(timeout=2)
    if p.returncode != 0:
        lines = "\n".join(f"template:   {escape(t)}" for t in tail)
        raise StepError(f"`{escape(cmd[:200])}` as {user['name']} in {escape(workdir)} failed with exit status "
                        f"{p.returncode}; "
                        f"its last lines:\n{lines}")


# COPY, as E2B's build places an entry: a link or a file is moved to dest
# (into it when dest ends in / or is a directory), a directory is merged
# into dest. Owner and mode go on what is copied; parents are made by root.
COPY_SH = r'''set -eu
entry=$1 dest=$2 owner=$3 mode=$4
if [ -L "$entry" ]; then
    chown -h "$owner" "$entry"
elif [ -d "$entry" ]; then
    chown -R "$owner" "$entry"
    [ -z "$mode" ] || chmod -R "$mode" "$entry"
    mkdir -p "$dest"
    (cd "$entry" && tar -cf - .) | tar -xf - -C "$dest" --keep-directory-symlink --no-overwrite-dir
    exit 0
else
    chown "$owner" "$entry"
    [ -z "$mode" ] || chmod "$mode" "$entry"
fi
case "$dest" in
    */) mkdir -p "$dest" ;;
    *) mkdir -p "$(dirname "$dest")" ;;
esac
mv -f "$entry" "$dest"
'''


def copy_step(ctx: dict, step: dict) -> None:
    src, dest, owner, mode = step["args"]
    user = account(ctx["user"])
    if not dest.startswith("/"):
        dest = os.path.join(ctx["workdir"] or user["home"], dest) + ("/" if dest.endswith("/") else "")
    owner = owner or f"{user['name']}:{user['name']}"
    if ":" not in owner:
        owner = f"{owner}:{owner}"
    chroot("sh", "-c", COPY_SH, "copy", step["staged"], dest, owner, mode)


# A value is expanded as a double-quoted string: variables, not commands.
def expand(ctx: dict, value: str) -> str:
    quoted = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`").replace("$(", "\\$(")
    root = {"name": "root", "group": "root", "home": "/root"}
    argv = ["env", "-i", "-C", "/", *run_env(root, ctx["env"]), "/bin/bash", "-c", f'printf "%s" "{quoted}"']
    return chroot(*argv).stdout


def env_step(ctx: dict, step: dict) -> None:
    a = step["args"]
    for k, v in zip(a[0::2], a[1::2]):
        ctx["env"][k] = expand(ctx, v)


WORKDIR_SH = r'''set -eu
target=$1 owner=$2
if [ ! -d "$target" ]; then
    first=$target
    while [ ! -e "$(dirname "$first")" ]; do first=$(dirname "$first"); done
    mkdir -p "$target"
    chown -R "$owner:$owner" "$first" 2>/dev/null || chown -R "$owner" "$first"
fi
cd "$target" && pwd
'''


def workdir_step(ctx: dict, step: dict) -> None:
    path = os.path.normpath(os.path.join(ctx["workdir"] or "/", step["args"][0]))
    ctx["workdir"] = chroot("sh", "-c", WORKDIR_SH, "workdir", path, ctx["user"]).stdout.strip()


USER_SH = r'''set -eu
name=$1 sudo=$2
id -u "$name" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$name"
if [ "$sudo" = true ]; then
    usermod -aG sudo "$name"
    passwd -d "$name" >/dev/null
    printf '%s ALL=(ALL:ALL) NOPASSWD: ALL\n' "$name" > "/etc/sudoers.d/e2b-template-$name"
    chmod 0440 "/etc/sudoers.d/e2b-template-$name"
fi
'''


def user_step(ctx: dict, step: dict) -> None:
    """USER NAME, USER UID, either with :GROUP. A uid is the account that has
    it, as E2B's `id -u 1000` finds it; the context keeps its name, which
    envd can look up (it takes users by name only). E2B's useradd of an
    all-digit name fails (Debian refuses one), so a uid no account has is
    refused, naming what to do. GROUP must be the account's own group: envd
    runs a sandbox's commands with it, so another would hold in the build only."""
    name, _, group = step["args"][0].partition(":")
    if name.isdigit():
        name = account(name)["name"]
    chroot("sh", "-c", USER_SH, "user", name, step["args"][1] if len(step["args"]) > 1 else "false")
    if group:
        acct = account(name)
        if group not in (acct["group"], acct["gid"]):
            raise StepError(f"USER {escape(step['args'][0])}: group {escape(group)} is not {name}'s own group "
                            f"({acct['group']}, gid {acct['gid']}); envd runs the sandbox's commands with the "
                            f"account's own group, so drop ':{escape(group)}' or make it {name}'s group")
    ctx["user"] = name


def launcher(ctx: dict, command: str, what: str) -> bytes:
    """/usr/lib/e2b-template/{start,ready}: command as the context's user, in
    its workdir, with its ENVs (E2B runs its start and ready commands so),
    from root (the start unit) or from that user already (a ready check)."""
    user = account(ctx["user"])
    workdir = ctx["workdir"] or user["home"]
    as_root = shlex.join(as_user_argv(user, workdir, ctx["env"], command))
    same = shlex.join(as_user_argv(user, workdir, ctx["env"], command, switch=False))
    # The comment names the workdir escaped: a newline in it must not end the comment.
    return (f"#!/bin/sh\n# The template's {what} (E2B's Template JSON), as user {user['name']} in "
            f"{escape(workdir)}:\n"
            f"# written by template/e2b/steps.py after the steps.\n"
            f"if [ \"$(id -u)\" = 0 ]; then exec {as_root}; fi\nexec {same}\n").encode()


# While the steps run, apt sees the sources the image ships (the build's
# own, e2b.sources, which mkosi.finalize keeps) and not mkosi's, which add
# archives (debian-debug, source indices) a build's mirror may not serve.
APT_ASIDE_SH = r'''set -eu
d=/etc/apt/sources.list.d a=$1
[ -f "$d/e2b.sources" ] || exit 0
mkdir -p "$a"
for f in "$d"/* "$d"/.[!.]*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    [ "$f" = "$d/e2b.sources" ] || mv "$f" "$a/"
done
'''
APT_BACK_SH = r'''set -eu
d=/etc/apt/sources.list.d a=$1
[ -d "$a" ] || exit 0
for f in "$a"/* "$a"/.[!.]*; do
    [ -e "$f" ] || [ -L "$f" ] || continue
    mv -f "$f" "$d/"
done
rmdir "$a"
'''
APT_ASIDE = f"{BUILD}/apt-sources-aside"

RUNNERS = {"RUN": run_step, "COPY": copy_step, "ENV": env_step, "WORKDIR": workdir_step, "USER": user_step}


def run_templates(rootfd: int, t: dict, layers: Layers | None = None) -> int:
    ctx = {"user": "user", "workdir": None, "env": dict(t.get("env", {}))}
    start = None
    chroot("sh", "-c", APT_ASIDE_SH, "apt-aside", APT_ASIDE)
    restored = []
    if layers:
        try:
            restored = layers.restore(sum(len(tpl["steps"]) for tpl in t["templates"]))
        except LayerError as e:
            print(f"template: {e}", file=sys.stderr)
            return 1
    pos = 0
    for tpl in t["templates"]:
        # A template on another starts as E2B's default USER leaves it.
        ctx["user"] = "user"
        who = f"template {tpl['name']}: " if len(t["templates"]) > 1 else "template: "
        for step in tpl["steps"]:
            pos += 1
            shown = escape(" ".join(step["args"])[:160])
            if pos <= len(restored):
                ctx = copy.deepcopy(restored[pos - 1]["ctx"])
                print(f"{who}step {step['index']} {step['type']} {shown}: from the step cache",
                      file=sys.stderr, flush=True)
                continue
            print(f"{who}step {step['index']} {step['type']} {shown}", file=sys.stderr, flush=True)
            if layers:
                layers.start()
            try:
                RUNNERS[step["type"]](ctx, step)
            except StepError as e:
                print(f"{who}step {step['index']} ({step['type']}) failed: {e}", file=sys.stderr)
                return 1
            if layers:
                layers.done(pos, ctx)
        if tpl["start"]:
            # Its start and ready commands run in the context its own steps left.
            start = dict(tpl["start"], ctx=copy.deepcopy(ctx))
    chroot("sh", "-c", APT_BACK_SH, "apt-back", APT_ASIDE)
    try:
        inroot.mkdirs(rootfd, OUT_DIR)
        for name in ("start", "ready"):
            cmd = start and start[f"{name}_cmd"]
            if cmd:
                inroot.write(rootfd, f"{OUT_DIR}/{name}", launcher(start["ctx"], cmd, f"{name} command"))
                inroot.chmod(rootfd, f"{OUT_DIR}/{name}", 0o755)
        context = {"user": ctx["user"], "workdir": ctx["workdir"], "env_names": sorted(ctx["env"])}
        inroot.write(rootfd, f"{OUT_DIR}/context.json", (json.dumps(context, indent=2) + "\n").encode())
    except (StepError, OSError) as e:
        print(f"template: writing the start and ready commands: {e}", file=sys.stderr)
        return 1
    return 0


def main(argv: list) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.steps")
    ap.add_argument("root")
    ap.add_argument("steps", help="the staged steps.json, a path in the image")
    ap.add_argument("--cache-in", help="the step cache's layers staged for this build")
    ap.add_argument("--cache-out", help="where the layers of the steps that run go")
    a = ap.parse_args(argv)
    rootfd = os.open(a.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        t = json.loads(inroot.read(rootfd, a.steps))
        layers = Layers(a.root, a.cache_in, a.cache_out) if (a.cache_in or a.cache_out) else None
        return run_templates(rootfd, t, layers)
    finally:
        os.close(rootfd)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
