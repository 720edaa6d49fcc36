#!/usr/bin/python3
"""e2b.toml, the file E2B's CLI wrote beside a template (`e2b template build`
before the Template SDK; `e2b template migrate` still reads it): read and
checked once, here, for both formats that can have it.

- A Dockerfile template (template/e2b/dockerfile.py): its `dockerfile` names
  the Dockerfile; start_cmd and ready_cmd go into the Template JSON.
- An E2B Template JSON folder (e2b.template.json beside it), from
  template/template.sh after build/e2b-template has read the JSON:

    python3 -m template.e2b.e2btoml --dir DIR --normal FILE --meta FILE

  FILE (--normal): build/e2b-template's normal form of DIR's JSON, rewritten
  with e2b.toml's start_cmd and ready_cmd where the JSON has no startCmd or
  readyCmd (as `e2b template migrate` puts them into the template; a JSON
  that has a different one is refused: the two files would mean two
  templates); --meta: its cpu_count and memory_mb, which
  template/e2b/stage.py --meta puts into the labels (vcpu, memory-mb), as
  for a Dockerfile template. `dockerfile` is not read there (the JSON is
  what is built), nor are the keys that name the template in E2B's cloud.

The folder is hostile input: e2b.toml is read without following a symlink,
as a regular file of at most 256 KiB, and what is printed is escaped
(sandbox/termsafe.py). Exit 1 with one message naming the file and the key."""
import argparse
import json
import os
import stat
import sys
import tomllib

from sandbox.termsafe import escape

MAX_TOML = 256 << 10
# e2b.toml's keys, as E2B's CLI (@e2b/cli 2.19.0, its configSchema and
# migrations) reads them. Those that name the template in E2B's cloud are
# accepted and not used: here the folder names the template.
TOML_KEYS = {
    "dockerfile": str, "start_cmd": str, "ready_cmd": str, "cpu_count": int, "memory_mb": int,
    "template_id": str, "template_name": str, "id": str, "name": str, "team_id": str,
}
# Our labels' ranges (template.conf's vcpu, memory_mb); E2B's CLI also wants an even memory_mb.
CPU_RANGE = (1, 64)
MEMORY_RANGE = (128, 65536)
READY_DEFAULT = "sleep 20"  # E2B's CLI: a start_cmd without a ready_cmd
# The reader's bound on a command (template/e2bjson.c, MAX_ARG_BYTES).
MAX_CMD = 256 << 10


class Refused(Exception):
    pass


def read_in(folder: str, rel: str, limit: int, what: str) -> bytes:
    """FOLDER/REL, a regular file whose path stays inside FOLDER (symlinked
    directories on the way only if they resolve inside it; the file itself
    not a symlink), at most LIMIT bytes."""
    path = os.path.join(folder, rel)
    if os.path.isabs(rel) or ".." in rel.split("/"):
        raise Refused(f"{what}: '{rel}' is outside the template's folder (absolute, or with '..'); "
                      f"name a file inside {folder}")
    parent = os.path.realpath(os.path.dirname(path))
    if not (parent == folder or parent.startswith(folder + "/")):
        raise Refused(f"{what}: '{rel}' leads out of the template's folder through a symlink; "
                      f"put the file itself inside {folder}")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise Refused(f"{what}: {path} does not exist; write it, or name the file that holds the Dockerfile") \
            from None
    except OSError as e:
        if os.path.islink(path):
            raise Refused(f"{what}: {path} is a symlink; it must be a regular file in the template's folder "
                          f"(copy it there)") from None
        raise Refused(f"{what}: {path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Refused(f"{what}: {path} is not a regular file; it must be one, in the template's folder")
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Refused(f"{what}: {path} is larger than {limit >> 10} KiB")
    return data


def read_toml(folder: str) -> dict:
    path = os.path.join(folder, "e2b.toml")
    data = read_in(folder, "e2b.toml", MAX_TOML, path)
    try:
        conf = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise Refused(f"{path}: not UTF-8 text; write it as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise Refused(f"{path}: not valid TOML ({e}); fix it (https://toml.io)") from None
    for k in ("id", "name"):  # the CLI's migrations: id -> template_id, name -> template_name
        if k in conf and f"template_{k}" not in conf:
            conf[f"template_{k}"] = conf.pop(k)
    for k, v in conf.items():
        want = TOML_KEYS.get(k)
        if want is None:
            raise Refused(f"{path}: key '{k}' is not one of e2b.toml's ({', '.join(sorted(TOML_KEYS))}); "
                          f"remove it")
        if not isinstance(v, want) or isinstance(v, bool):
            raise Refused(f"{path}: key '{k}' must be {'a string' if want is str else 'an integer'}, "
                          f"not {type(v).__name__} {json.dumps(v, default=str)[:80]}")
    for k, (lo, hi) in (("cpu_count", CPU_RANGE), ("memory_mb", MEMORY_RANGE)):
        if k in conf and not lo <= conf[k] <= hi:
            raise Refused(f"{path}: key '{k}' = {conf[k]}: must be a whole number from {lo} to {hi}")
    if conf.get("memory_mb", 0) % 2:
        raise Refused(f"{path}: key 'memory_mb' = {conf['memory_mb']}: must be even, as E2B's CLI wants it")
    for k in ("start_cmd", "ready_cmd", "dockerfile"):
        if k in conf and not conf[k].strip():
            raise Refused(f"{path}: key '{k}' is empty; give a value or remove the key")
    return conf


def _has_control(s: str) -> bool:
    """A control character other than tab and newline (the reader's rule for commands)."""
    return any((ord(c) < 0x20 and c not in "\t\n") or ord(c) == 0x7f for c in s)


def apply_to_json(folder: str, normal: dict, conf: dict) -> dict:
    """NORMAL (build/e2b-template's normal form of FOLDER/e2b.template.json)
    with CONF's start_cmd and ready_cmd; raises Refused when the JSON sets
    the same command to something else."""
    toml, json_path = os.path.join(folder, "e2b.toml"), os.path.join(folder, "e2b.template.json")
    out = dict(normal)
    for key, json_key, normal_key in (("start_cmd", "startCmd", "start_cmd"), ("ready_cmd", "readyCmd", "ready_cmd")):
        value = conf.get(key)
        if value is None:
            continue
        if len(value.encode()) > MAX_CMD or _has_control(value):
            raise Refused(f"{toml}: key '{key}' is larger than 256 KiB or has a control character other than tab "
                          f"and newline; write the command without one")
        have = normal.get(normal_key)
        if have is not None and have != value:
            raise Refused(f"{toml}: key '{key}' ({value[:60]!r}) differs from {json_path}'s {json_key} "
                          f"({have[:60]!r}); the JSON is what is built: remove {key} from e2b.toml, or put it "
                          f"into the template (set_start_cmd, set_ready_cmd) and write the JSON again")
        out[normal_key] = value
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.e2btoml")
    ap.add_argument("--dir", required=True, help="the template's folder, with e2b.toml and e2b.template.json")
    ap.add_argument("--normal", required=True, help="build/e2b-template's normal form of its JSON, rewritten")
    ap.add_argument("--meta", required=True, help="where cpu_count and memory_mb go (JSON)")
    a = ap.parse_args(argv)
    folder = os.path.realpath(a.dir)
    try:
        conf = read_toml(folder)
        with open(a.normal, encoding="utf-8") as f:
            normal = apply_to_json(folder, json.load(f), conf)
    except Refused as e:
        print(escape(f"template: {e}"), file=sys.stderr)
        return 1
    with open(a.normal, "w", encoding="utf-8") as f:
        json.dump(normal, f, indent=2)
        f.write("\n")
    with open(a.meta, "w", encoding="utf-8") as f:
        json.dump({"cpu_count": conf.get("cpu_count"), "memory_mb": conf.get("memory_mb")}, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
