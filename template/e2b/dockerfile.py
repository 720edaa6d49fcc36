#!/usr/bin/env python3
"""E2B's older template format (e2b.Dockerfile with e2b.toml) and a plain
Dockerfile, converted to E2B's Template JSON by E2B's own Python SDK
(`Template(file_context_path=DIR).from_dockerfile(...)`, its parser
e2b/template/dockerfile_parser.py on e2b_dockerfile_utils), so the reader
(build/e2b-template --json) and the stager (template/e2b/stage.py) take it as they
take an e2b.template.json. Runs with $(build)/e2b-sdk's python
(template/e2b/sdk-requirements.txt), from template/template.sh:

  python3 -m template.e2b.dockerfile --dir DIR --out FILE [--meta FILE]

FILE: exactly what `Template.to_json` writes, with e2b.toml's start_cmd and
ready_cmd applied as E2B's CLI `e2b template migrate` applies them, and
FROM e2bdev/base[:TAG] or e2bdev/code-interpreter[:TAG] (E2B's own images
on Docker Hub, what e2b.Dockerfile users build on) as fromTemplate base /
code-interpreter (our flavors). --meta: e2b.toml's values that are not
steps ({"dockerfile", "cpu_count", "memory_mb"}).

Which Dockerfile: with DIR/e2b.toml, its `dockerfile` key (default
e2b.Dockerfile), a path inside DIR; without, DIR/e2b.Dockerfile, else
DIR/Dockerfile. The folder is hostile input: every file is opened without
following a symlink out of DIR and must be a regular file; the SDK is handed
the Dockerfile's text, never a path, and its COPY sources are checked
inside DIR before it hashes them; what it prints is escaped (sandbox/termsafe.py).
Exit 1 with one message naming the file and what to do."""
import argparse
import contextlib
import io
import json
import os
import re
import stat
import sys
import tomllib

from sandbox.termsafe import escape
from template.e2b import copyfiles

MAX_DOCKERFILE = 1 << 20
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
# FROM of E2B's own images: any tag, or a digest.
E2B_IMAGES = re.compile(r"e2bdev/(base|code-interpreter)(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?")
E2B_TEMPLATES = {"base": "base", "code-interpreter": "code-interpreter"}
READY_DEFAULT = "sleep 20"  # E2B's CLI: a start_cmd without a ready_cmd


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


def which_dockerfile(folder: str, conf) -> str:
    """The Dockerfile's path relative to FOLDER."""
    if conf is not None:
        return conf.get("dockerfile", "e2b.Dockerfile")
    for name in ("e2b.Dockerfile", "Dockerfile"):
        if os.path.lexists(os.path.join(folder, name)):
            return name
    raise Refused(f"template={folder}: no template.conf, e2b.template.json, e2b.toml, e2b.Dockerfile or "
                  f"Dockerfile in it (see template/README.md)")


def check_copies(folder: str, template, dockerfile: str) -> None:
    """Each COPY source inside the folder before the SDK hashes it: the hash
    of a file outside it would carry that file's content into the JSON."""
    ignore = copyfiles.IgnoreMatcher.of_folder(folder)
    from e2b.template.consts import RESOLVE_SYMLINKS
    for i in template._instructions:
        if str(getattr(i["type"], "value", i["type"])) != "COPY":
            continue
        src = i["args"][0]
        what = f"{dockerfile}: COPY {src} {i['args'][1]}"
        if src.startswith("/") or ".." in src.split("/"):
            raise Refused(f"{what}: the source is outside the template's folder (absolute, or with '..'); "
                          f"copy the file into {folder} and name it relative to it")
        rels = copyfiles.list_files(folder, src, ignore)
        if not rels:
            raise Refused(f"{what}: no file of the template's folder matches it (less .dockerignore's); "
                          f"add the file or fix the source")
        resolve = i.get("resolveSymlinks")
        copyfiles.check_inside(folder, rels, RESOLVE_SYMLINKS if resolve is None else resolve, what)


def convert(folder: str) -> tuple:
    """(Template.to_json's text, the meta)."""
    from e2b import Template
    from e2b.exceptions import TemplateException
    from e2b.template import dockerfile_parser
    conf = read_toml(folder) if os.path.lexists(os.path.join(folder, "e2b.toml")) else None
    rel = which_dockerfile(folder, conf)
    path = os.path.join(folder, rel)
    what = path if conf is None else \
        f"{folder}/e2b.toml: key 'dockerfile'{'' if 'dockerfile' in conf else ' (unset: e2b.Dockerfile)'}"
    raw = read_in(folder, rel, MAX_DOCKERFILE, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{path}: not UTF-8 text; write it as UTF-8") from None
    if not text.strip():
        raise Refused(f"{path}: empty; a Dockerfile needs a FROM")
    # The SDK reads its argument as a path when one of that name exists (any
    # file of the build machine); it gets the text we read, always as text.
    if not hasattr(dockerfile_parser, "_read_dockerfile"):
        raise Refused(f"{dockerfile_parser.__file__}: this SDK has no _read_dockerfile; "
                      f"template/e2b/sdk-requirements.txt pins the one template/e2b/dockerfile.py was written for")
    dockerfile_parser._read_dockerfile = lambda content: content
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            builder = Template(file_context_path=folder).from_dockerfile(text)
    except (ValueError, TemplateException) as e:  # DockerfileSyntaxError; a COPY source out of the folder
        raise Refused(f"{path}: E2B's Dockerfile parser refuses it: {e}; fix that line (E2B builds one stage, "
                      f"from one FROM: see template/README.md)") from None
    for line in said.getvalue().splitlines():  # the parser's warnings: skipped instructions and flags
        print(escape(f"template: {path}: {line}"), file=sys.stderr)
    t = builder._template
    m = E2B_IMAGES.fullmatch(t._base_image or "")
    if m:  # as Template.from_template sets them
        t._base_template, t._base_image = E2B_TEMPLATES[m.group(1)], None
    if conf is not None:  # as `e2b template migrate` applies them
        if conf.get("start_cmd"):
            builder.set_start_cmd(conf["start_cmd"], conf.get("ready_cmd") or READY_DEFAULT)
        elif conf.get("ready_cmd"):
            builder.set_ready_cmd(conf["ready_cmd"])
    check_copies(folder, t, path)
    try:
        out = Template.to_json(builder)
    except Exception as e:  # the SDK's TemplateException, ValueError, OSError while hashing
        raise Refused(f"{path}: E2B's SDK cannot write its Template JSON: {e}") from None
    meta = {"dockerfile": rel, "cpu_count": (conf or {}).get("cpu_count"),
            "memory_mb": (conf or {}).get("memory_mb")}
    return out, meta


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.dockerfile")
    ap.add_argument("--dir", required=True, help="the template's folder")
    ap.add_argument("--out", required=True, help="where the Template JSON goes")
    ap.add_argument("--meta", help="where e2b.toml's cpu_count and memory_mb go (JSON)")
    a = ap.parse_args(argv)
    folder = os.path.realpath(a.dir)
    try:
        if not os.path.isdir(folder):
            raise Refused(f"template={a.dir}: not a directory")
        out, meta = convert(folder)
    except (Refused, copyfiles.CopyError) as e:
        print(escape(f"template: {e}"), file=sys.stderr)
        return 1
    files = [(a.out, out)] + ([(a.meta, json.dumps(meta, indent=1))] if a.meta else [])
    for path, text in files:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
