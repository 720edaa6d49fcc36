#!/usr/bin/python3
"""Check that pip requirement files are fully pinned and hash-locked.

  check-constraints.py [--closure] [--wheels DIR] FILE...
                                   exit 0 if every file passes, 1 if not, 2 usage
  check-constraints.py --select-kernels LIST FILE
                                   FILE without the requirements of kernels not in
                                   LIST (comma-separated), to stdout

Rules, for `pydeps=pip` (installed with --require-hashes --no-deps
--only-binary :all:, so every line must say exactly which files are allowed):
  - a requirement is `name==version` (PEP 503 name, no extras, no markers,
    no URLs, no wildcards) followed by one or more `--hash=sha256:<64 hex>`;
  - no other options (-r, -c, -e, --index-url, ...): the index is the build's;
  - each name once per file; a file has at least one requirement.
A file with `# kernel: NAME` lines (constraints/e2b-ci-kernels.txt) also:
  - every requirement follows a `# kernel: NAME` line (its kernel, until the
    next one) and a `# requires: WHEEL: NAME...` line (`-`: none) naming it:
    the wheel's unconditional Requires-Dist.
--closure: every name on a `# requires:` line is pinned in one of the FILEs,
and no name is pinned in two of them (they are installed together).
--wheels DIR: each wheel in DIR that has a `# requires:` line must declare
exactly those Requires-Dist (extras aside): the record is checked against
what the index served.
Each problem is printed as FILE:LINE: NAME: what is wrong.
"""
import os
import re
import sys
import zipfile

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


KERNEL_RE = re.compile(r"^# kernel: (?P<kernel>\S*)\s*$")
REQUIRES_RE = re.compile(rf"^# requires: (?P<wheel>{NAME}): (?P<names>.+)$")


def kernel_entries(path, text):
    """({name: (line, kernel, requires or None)}, problems) of a file with
    `# kernel:` lines; ({}, []) for a file without."""
    if not any(KERNEL_RE.match(l) for l in text.splitlines()):
        return {}, []
    entries, problems, kernel, pending = {}, [], None, None
    for n, line in enumerate(text.splitlines(), 1):
        if m := KERNEL_RE.match(line):
            kernel = m.group("kernel")
            if not re.fullmatch(r"[a-z]+", kernel):
                problems.append(f"{path}:{n}: kernel {kernel!r}: a kernel name is lowercase letters")
            if pending:
                problems.append(f"{path}:{pending[0]}: {pending[1]}: `# requires:` without its requirement")
            pending = None
        elif line.startswith("# requires:"):
            m = REQUIRES_RE.match(line)
            if not m:
                problems.append(f"{path}:{n}: not `# requires: WHEEL: NAME...` (or `-`)")
                continue
            names = m.group("names").split()
            names = [] if names == ["-"] else names
            bad = [x for x in names if not re.fullmatch(NAME, x)]
            if bad:
                problems.append(f"{path}:{n}: {m.group('wheel')}: {bad[0]}: not a package name")
            pending = (n, m.group("wheel"), {canonical(x) for x in names})
        elif m := re.match(rf"^({NAME})==", line):
            name = canonical(m.group(1))
            if kernel is None:
                problems.append(f"{path}:{n}: {m.group(1)}: before any `# kernel: NAME` line")
            if pending is None or canonical(pending[1]) != name:
                problems.append(f"{path}:{n}: {m.group(1)}: no `# requires: {m.group(1)}: ...` line just before it")
            entries[name] = (n, kernel, pending[2] if pending and canonical(pending[1]) == name else None)
            pending = None
    if pending:
        problems.append(f"{path}:{pending[0]}: {pending[1]}: `# requires:` without its requirement")
    return entries, problems


def select_kernels(text, chosen):
    """TEXT without the sections of kernels not in CHOSEN."""
    out, keep = [], True
    for line in text.splitlines(keepends=True):
        if m := KERNEL_RE.match(line):
            keep = m.group("kernel") in chosen
        if keep:
            out.append(line)
    return "".join(out)


def pins_of(text):
    return {canonical(m.group(1)) for m in re.finditer(rf"^({NAME})==", text, re.M)}


def check_closure(texts):
    """Every recorded requirement is pinned in one of the files; none twice."""
    problems, owner = [], {}
    for path, text in texts.items():
        for name in sorted(pins_of(text)):
            if name in owner:
                problems.append(f"{path}: {name}: also pinned in {owner[name]} (installed together: pin it once)")
            owner.setdefault(name, path)
    for path, text in texts.items():
        for name, (n, kernel, requires) in sorted(kernel_entries(path, text)[0].items()):
            for dep in sorted(requires or ()):
                if dep not in owner:
                    problems.append(f"{path}:{n}: {name}: requires {dep}, pinned in none of "
                                    + ", ".join(map(str, texts)))
    return problems


def wheel_requires(wheel):
    """(name, {Requires-Dist names, extras aside}) from the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        metas = [i for i in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", i)]
        if len(metas) != 1:
            raise ValueError("not one *.dist-info/METADATA")
        meta = z.read(metas[0]).decode("utf-8", "replace")
    name, requires = None, set()
    for line in meta.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        if key == "Name":
            name = canonical(value.strip())
        elif key == "Requires-Dist" and not re.search(r"\bextra\s*==", value):
            m = re.match(NAME, value.strip())
            if not m:
                raise ValueError(f"Requires-Dist {value.strip()[:60]!r}: no package name")
            requires.add(canonical(m.group(0)))
    if name is None:
        raise ValueError("METADATA has no Name")
    return name, requires


def check_wheels(directory, texts):
    recorded = {}
    for path, text in texts.items():
        for name, (n, _kernel, requires) in kernel_entries(path, text)[0].items():
            recorded[name] = (f"{path}:{n}", requires)
    problems = []
    for wheel in sorted(os.listdir(directory)):
        if not wheel.endswith(".whl"):
            continue
        try:
            name, requires = wheel_requires(os.path.join(directory, wheel))
        except (OSError, ValueError, zipfile.BadZipFile) as e:
            problems.append(f"{directory}/{wheel}: unreadable wheel: {e}")
            continue
        if name in recorded and recorded[name][1] is not None and requires != recorded[name][1]:
            want = " ".join(sorted(requires)) or "-"
            problems.append(f"{recorded[name][0]}: {name}: the wheel {wheel} requires {want}, "
                            f"the `# requires:` line says {' '.join(sorted(recorded[name][1])) or '-'}; "
                            "update the line and pin what it needs")
    return problems


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[0] == "--select-kernels":
        if len(argv) != 3:
            print(__doc__, file=sys.stderr)
            return 2
        try:
            sys.stdout.write(select_kernels(read(argv[2]), set(argv[1].split(","))))
        except OSError as e:
            print(f"check-constraints: {argv[2]}: {e.strerror}", file=sys.stderr)
            return 1
        return 0
    closure, wheels = False, None
    while argv and argv[0] in ("--closure", "--wheels"):
        if argv[0] == "--closure":
            closure, argv = True, argv[1:]
        elif len(argv) > 1:
            wheels, argv = argv[1], argv[2:]
        else:
            argv = []
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    bad, texts = False, {}
    for path in argv:
        try:
            texts[path] = text = read(path)
        except OSError as e:
            print(f"check-constraints: {path}: {e.strerror}", file=sys.stderr)
            bad = True
            continue
        for p in check_text(path, text) + kernel_entries(path, text)[1]:
            print(f"check-constraints: {p}", file=sys.stderr)
            bad = True
    more = check_closure(texts) if closure else []
    if wheels is not None:
        more += check_wheels(wheels, texts)
    for p in more:
        print(f"check-constraints: {p}", file=sys.stderr)
        bad = True
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
