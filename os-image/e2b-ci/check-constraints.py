#!/usr/bin/python3
"""Check that pip requirement files are fully pinned and hash-locked.

  check-constraints.py FILE...     exit 0 if every file passes, 1 if not, 2 usage

Rules, for `pydeps=pip` (installed with --require-hashes --no-deps
--only-binary :all:, so every line must say exactly which files are allowed):
  - a requirement is `name==version` (PEP 503 name, no extras, no markers,
    no URLs, no wildcards) followed by one or more `--hash=sha256:<64 hex>`;
  - no other options (-r, -c, -e, --index-url, ...): the index is the build's;
  - each name once per file; a file has at least one requirement.
Each problem is printed as FILE:LINE: NAME: what is wrong.
"""
import re
import sys

NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
VERSION = r"[0-9][A-Za-z0-9.+!_-]*"
PIN_RE = re.compile(rf"^(?P<name>{NAME})==(?P<version>{VERSION})$")
HASH_RE = re.compile(r"^--hash=sha256:[0-9a-f]{64}$")


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def logical_lines(text):
    """(first line number, text) per logical line: continuations joined,
    comments (a '#' at the start or after whitespace) dropped."""
    out, parts, start = [], [], None
    for n, raw in enumerate(text.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if start is None:
            start = n
        cont = line.endswith("\\")
        parts.append(line[:-1] if cont else line)
        if not cont:
            joined = " ".join(p.strip() for p in parts).strip()
            if joined:
                out.append((start, joined))
            parts, start = [], None
    if parts and " ".join(parts).strip():
        out.append((start, " ".join(p.strip() for p in parts).strip() + " \\"))
    return out


def check_text(path, text):
    """A list of problems ('' if none)."""
    problems, seen = [], {}
    lines = logical_lines(text)
    for n, line in lines:
        words = line.split()
        if words[-1] == "\\":
            problems.append(f"{path}:{n}: the file ends inside a continued line")
            continue
        head, rest = words[0], words[1:]
        if head.startswith("-"):
            problems.append(f"{path}:{n}: option {head} is not allowed; only name==version --hash=sha256:... lines")
            continue
        m = PIN_RE.match(head)
        if not m:
            problems.append(f"{path}:{n}: {head}: not pinned as name==version (no ranges, extras, markers or URLs)")
            continue
        name = m.group("name")
        if not rest:
            problems.append(f"{path}:{n}: {name}: no --hash=sha256:...")
        for word in rest:
            if not HASH_RE.match(word):
                problems.append(f"{path}:{n}: {name}: {word}: not --hash=sha256:<64 lowercase hex>")
        key = canonical(name)
        if key in seen:
            problems.append(f"{path}:{n}: {name}: listed twice (first on line {seen[key]})")
        seen.setdefault(key, n)
    if not seen and not problems:
        problems.append(f"{path}: no requirements")
    return problems


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    bad = False
    for path in argv:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            print(f"check-constraints: {path}: {e.strerror}", file=sys.stderr)
            bad = True
            continue
        for p in check_text(path, text):
            print(f"check-constraints: {p}", file=sys.stderr)
            bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
