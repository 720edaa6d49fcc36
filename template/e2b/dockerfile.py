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
on Docker Hub, what e2b.Dockerfile users build on; also with docker.io/
first) as fromTemplate base / code-interpreter (our flavors e2b-base and
e2b-ci). --meta: e2b.toml's values that are not steps ({"dockerfile",
"cpu_count", "memory_mb"}; e2b.toml itself: template/e2b/e2btoml.py).

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
import sys

from sandbox.termsafe import escape
from template.e2b import copyfiles
from template.e2b.e2btoml import READY_DEFAULT, Refused, read_in, read_toml

MAX_DOCKERFILE = 1 << 20
# FROM of E2B's own images, any tag or digest, with or without Docker Hub's
# host: the same set as the Template JSON's fromImage (template/e2bjson.c,
# e2b_image_template), so FROM e2bdev/base and fromImage e2bdev/base agree.
E2B_IMAGES = re.compile(r"(?:(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)/)?"
                        r"e2bdev/(base|code-interpreter)(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?")


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
        t._base_template, t._base_image = m.group(1), None
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
