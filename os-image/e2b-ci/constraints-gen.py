#!/usr/bin/python3
"""Generate constraints/e2b-ci.txt (pydeps=pip) from upstream's requirements.

    constraints-gen.py [--source DIR | --archive FILE] [--output FILE]
    constraints-gen.py --check [--source DIR | --archive FILE] [--output FILE]

Input: e2b-dev/code-interpreter at the commit pinned in
recipes/code-interpreter.lock: its template/requirements.txt (the kernels'
stack) and template/server/requirements.txt (the API server's), read from a
verified tree (--source, e.g. from `pinfetch --lock … --output DIR`) or from
an archive of the commit (--archive; default ../shared/upstream/
code-interpreter-<commit>.tar.gz), whose tree is verified against the lock's
tree_sha256 with build/pinfetch --hash-tree first.

Generate: pip resolves both files together (one venv runs Jupyter, the kernels
and the server) for the image's CPython and platform (--python, default 3.13,
trixie's; manylinux x86_64; wheels only), and the whole closure is written
with each chosen wheel's sha256. The index is pip's own: the machine's pip
configuration, PIP_INDEX_URL, or --index URL; no host is named here.
PIP_FIND_LINKS and PIP_NO_INDEX are dropped, so a local wheel directory never
stands in for the index.

Deviations from upstream are declared in DEVIATIONS below, or found: a pin
with no wheel for the CPython/platform is replaced by the nearest version
that has one. Each is written into the file as a `# deviation:` line (read by
stack-table.py). Packages of the closure in DROPPED are left out, each on a
`# dropped:` line with its reason.

--check (offline): exit 1 when the file disagrees with upstream's
requirements: a top-level pin missing or at another version than upstream's
(after the recorded deviations), a recorded deviation that no longer applies,
a dropped package that is pinned, or a requirement-file digest in the header
that differs. It also checks the kernels' file beside it (--kernels, default
e2b-ci-kernels.txt in the output's folder, when there is one; hand-written):
check-constraints.py --closure on both, so every Requires-Dist recorded for a
kernel's wheel is pinned in one of the two files, and nothing in both.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

HERE = pathlib.Path(__file__).resolve().parent
TOP = HERE.parent.parent
LOCK = TOP / "recipes" / "code-interpreter.lock"
OUTPUT = TOP / "constraints" / "e2b-ci.txt"
REQ_FILES = ("template/requirements.txt", "template/server/requirements.txt")
PLATFORMS = ("manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")

# Upstream's name -> (our requirement or None, reason). None: not from the index.
DEVIATIONS = {
    "opencv-python": ("opencv-python-headless", "the headless build of the same version: "
                      "no Qt/X11 libraries, a sandbox has no display"),
    "e2b-charts": (None, "shipped from the pinned archive (chart_data_extractor/e2b_charts, "
                   "the source PyPI's package is built from); its dependencies are pinned here"),
}
# Packages of the resolved closure left out, -> reason. Installed with
# --no-deps, so nothing pulls them back; each is written as a `# dropped:` line.
DROPPED = {
    "rfc3987-syntax": "an optional format checker of jsonschema[format-nongpl] (through jupyter-events) "
                      "that builds a Lark parser when imported: 2.3 s of every Jupyter start on the build host "
                      "(0.4-0.7 s without it), and as many times more under TCG as emulation is slower; jsonschema skips the iri formats without it",
}
DROP_RE = re.compile(r"^# dropped: (?P<name>\S+) (?P<version>\S+): (?P<why>.+)$")
DEV_RE = re.compile(r"^# deviation: (?P<up>\S+) (?P<upver>\S+) -> (?P<ours>\S+) (?P<ourver>\S+): (?P<why>.+)$")
DIGEST_RE = re.compile(r"^# upstream (?P<file>\S+) sha256 (?P<hex>[0-9a-f]{64})$")


class GenError(Exception):
    pass


def lock_field(field):
    for line in LOCK.read_text().splitlines():
        m = re.match(rf"^{field}\s*=\s*(\S+)", line)
        if m:
            return m.group(1)
    raise GenError(f"{LOCK}: no {field} = … line")


def read_upstream(source, archive):
    """{relative path: text} of REQ_FILES, from a tree or a verified archive."""
    if source:
        root = pathlib.Path(source)
        try:
            return {f: (root / f).read_text() for f in REQ_FILES}
        except OSError as e:
            raise GenError(f"{e.filename}: {e.strerror} (is --source the code-interpreter tree?)")
    commit = lock_field("version")
    archive = pathlib.Path(archive or TOP.parent / "shared" / "upstream" / f"code-interpreter-{commit}.tar.gz")
    if not archive.is_file():
        raise GenError(f"{archive}: not found; pass --archive FILE (an archive of commit {commit}) "
                       "or --source DIR (a verified tree)")
    pinfetch = TOP / "build" / "pinfetch"
    if not os.access(pinfetch, os.X_OK):
        raise GenError(f"{pinfetch}: not built (run `make tools`); it verifies {archive} against {LOCK}")
    cp = subprocess.run([str(pinfetch), "--hash-tree", str(archive)], capture_output=True, text=True)
    want = lock_field("tree_sha256")
    if cp.returncode != 0 or cp.stdout.split()[:1] != [want]:
        raise GenError(f"{archive}: its tree is not the one pinned in {LOCK} "
                       f"(tree_sha256 {want}, got {cp.stdout.strip() or cp.stderr.strip()})")
    out = {}
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            rel = member.name.split("/", 1)[-1]
            if rel in REQ_FILES and member.isfile():
                out[rel] = tar.extractfile(member).read().decode()
    missing = [f for f in REQ_FILES if f not in out]
    if missing:
        raise GenError(f"{archive}: has no {', '.join(missing)} (upstream layout changed?)")
    return out


def upstream_pins(texts):
    """[(name, version or None, file)] in upstream's order, one per name."""
    pins, seen = [], {}
    for rel, text in texts.items():
        for n, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            req = Requirement(line)
            specs = list(req.specifier)
            if len(specs) > 1 or (specs and specs[0].operator != "=="):
                raise GenError(f"{rel}:{n}: {line}: not an exact pin; the generator takes name==version or a bare name")
            version = specs[0].version if specs else None
            key = canonicalize_name(req.name)
            if key in seen:
                if seen[key] != version:
                    raise GenError(f"{rel}:{n}: {req.name}: {version}, but {seen[key]} elsewhere")
                continue
            seen[key] = version
            pins.append((key, version, rel, sorted(req.extras)))
    return pins


def pip_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PIP_FIND_LINKS", "PIP_NO_INDEX")}
    env["PYTHONHASHSEED"] = "0"
    return env


def target_args(python):
    args = ["--only-binary", ":all:", "--implementation", "cp", "--python-version", python,
            "--abi", "cp" + python.replace(".", "")]
    for p in PLATFORMS:
        args += ["--platform", p]
    return args


def pip(args, index):
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check"] + args
    if index:
        cmd += ["--index-url", index]
    return subprocess.run(cmd, capture_output=True, text=True, env=pip_env())


def nearest_with_wheel(name, version, python, index):
    """The version nearest to upstream's pin that has a wheel (the next one up
    first, else the newest one below), or raise naming the package."""
    cp = pip(["index", "versions", name] + target_args(python), index)
    m = re.search(r"Available versions: (.+)", cp.stdout)
    if not m:
        raise GenError(f"{name}: no wheel of any version for CPython {python} manylinux x86_64 "
                       f"({cp.stderr.strip().splitlines()[-1:] or 'no versions'})")
    have = sorted(Version(v.strip()) for v in m.group(1).split(","))
    pin = Version(version)
    up = [v for v in have if v > pin]
    return str(up[0] if up else have[-1])


def plan(pins):
    """[(upstream name, upstream version, our name, our version, reason)] and
    the requirements to resolve."""
    rows = []
    for name, version, _rel, extras in pins:
        ours, why = DEVIATIONS.get(name, (name, ""))
        rows.append([name, version, ours, version, why, extras])
    return rows


def resolve(rows, python, index):
    """pip's report for rows, replacing pins without a wheel; returns installs."""
    while True:
        reqs = [f"{ours}{'[' + ','.join(x) + ']' if x else ''}{'==' + v if v else ''}"
                for _n, _uv, ours, v, _w, x in rows if ours]
        with tempfile.TemporaryDirectory() as tmp:
            req = pathlib.Path(tmp, "in.txt")
            req.write_text("\n".join(reqs) + "\n")
            report = pathlib.Path(tmp, "report.json")
            cp = pip(["install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
                      "--target", str(pathlib.Path(tmp, "t"))] + target_args(python) + ["-r", str(req)], index)
            if cp.returncode == 0:
                return json.loads(report.read_text())["install"]
        m = re.search(r"No matching distribution found for (\S+?)==(\S+)", cp.stderr)
        row = m and next((r for r in rows if r[2] and canonicalize_name(r[2]) == canonicalize_name(m.group(1))
                          and r[3] == m.group(2)), None)
        if not row or row[4].startswith("no wheel"):
            tail = "\n".join(cp.stderr.strip().splitlines()[-6:])
            raise GenError(f"pip could not resolve upstream's requirements for CPython {python}:\n{tail}")
        nearest = nearest_with_wheel(row[2], row[3], python, index)
        row[4] = f"no wheel of {row[3]} for CPython {python} manylinux x86_64; {nearest} is the nearest that has one"
        row[3] = nearest


def render(texts, rows, installs, python, commit):
    lines = [
        "# e2b-ci's Python stack for pydeps=pip: upstream's template/requirements.txt",
        "# and template/server/requirements.txt at e2b-dev/code-interpreter",
        f"# {commit} (recipes/code-interpreter.lock), resolved together, with",
        f"# their whole closure, for CPython {python} manylinux x86_64, wheels only.",
        "# GENERATED by os-image/e2b-ci/constraints-gen.py; do not edit. Each hash is",
        "# the sha256 the index published for the wheel pip chose (--require-hashes",
        "# --no-deps --only-binary :all: at build time).",
    ]
    for rel, text in texts.items():
        lines.append(f"# upstream {rel} sha256 {hashlib.sha256(text.encode()).hexdigest()}")
    for name, upver, ours, ourver, why, _x in rows:
        if why:
            lines.append(f"# deviation: {name} {upver or '(latest)'} -> {ours or '-'} {ourver if ours else '-'}: {why}")
    entries = []
    for inst in installs:
        meta, info = inst["metadata"], inst["download_info"]
        if canonicalize_name(meta["name"]) in DROPPED:
            lines.append(f"# dropped: {canonicalize_name(meta['name'])} {meta['version']}: "
                         f"{DROPPED[canonicalize_name(meta['name'])]}")
            continue
        digest = info.get("archive_info", {}).get("hashes", {}).get("sha256")
        if not digest:
            raise GenError(f"{meta['name']} {meta['version']}: the index gave no sha256 for {info['url']}")
        wheel = info["url"].rsplit("/", 1)[-1].split("#", 1)[0]
        entries.append((canonicalize_name(meta["name"]), meta["version"], wheel, digest))
    for name, version, wheel, digest in sorted(entries):
        lines.append(f"{name}=={version} \\\n    --hash=sha256:{digest}  # {wheel}")
    return "\n".join(lines) + "\n"


def parse_constraints(text):
    pins = {}
    for m in re.finditer(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", text, re.M):
        pins[canonicalize_name(m.group(1))] = m.group(2)
    devs = {m.group("up"): m.groupdict() for m in map(DEV_RE.match, text.splitlines()) if m}
    digests = {m.group("file"): m.group("hex") for m in map(DIGEST_RE.match, text.splitlines()) if m}
    dropped = {m.group("name") for m in map(DROP_RE.match, text.splitlines()) if m}
    return pins, devs, digests, dropped


def check(texts, pins, path):
    try:
        text = path.read_text()
    except OSError as e:
        raise GenError(f"{path}: {e.strerror} (generate it: os-image/e2b-ci/constraints-gen.py)")
    have, devs, digests, dropped = parse_constraints(text)
    problems = [f"{name}: recorded as dropped, but pinned" for name in sorted(dropped) if name in have]
    problems += [f"{name}: in DROPPED, pinned in the file" for name in sorted(DROPPED) if name in have]
    for rel, t in texts.items():
        got = hashlib.sha256(t.encode()).hexdigest()
        if digests.get(rel) != got:
            problems.append(f"upstream {rel}: sha256 {got}, the file was generated from {digests.get(rel)}")
    names = {n for n, *_ in pins}
    for up in devs:
        if up not in names:
            problems.append(f"{up}: a deviation is recorded, but upstream no longer requires it")
    for name, version, rel, _x in pins:
        dev = devs.get(name)
        ours, ourver = name, version
        if dev:
            if (dev["upver"] if version else "(latest)") != (version or "(latest)"):
                problems.append(f"{name}: the deviation is recorded for {dev['upver']}, upstream's {rel} pins {version}")
            ours, ourver = dev["ours"], dev["ourver"]
        elif name in DEVIATIONS:
            problems.append(f"{name}: deviation in DEVIATIONS not recorded in the file")
        if ours == "-":
            continue
        got = have.get(canonicalize_name(ours))
        if got is None:
            problems.append(f"{ours}: upstream's {rel} requires it, not pinned in the file")
        elif ourver and got != ourver:
            problems.append(f"{ours}: pinned {got}, upstream's {rel} says {ourver}")
    for p in problems:
        print(f"constraints-gen: {path}: {p}", file=sys.stderr)
    return not problems


def check_kernels(out, kernels):
    """The kernels' hand-written file with OUT: check-constraints.py --closure."""
    cp = subprocess.run([sys.executable, str(HERE / "check-constraints.py"), "--closure", str(out), str(kernels)])
    if cp.returncode != 0:
        print(f"constraints-gen: {kernels}: does not agree with {out} (see above; constraints/README.md, "
              "\"Kernels\")", file=sys.stderr)
        return False
    print(f"constraints-gen: {kernels}: every kernel wheel's requirement is pinned")
    return True


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--source", help="a verified code-interpreter tree")
    src.add_argument("--archive", help="an archive of the pinned commit (verified against the lock)")
    ap.add_argument("--output", default=str(OUTPUT))
    ap.add_argument("--python", default="3.13", help="the image's CPython (trixie: 3.13)")
    ap.add_argument("--index", default=os.environ.get("PIP_INDEX") or None,
                    help="a PEP 503 index (default: pip's own configuration)")
    ap.add_argument("--check", action="store_true", help="offline: fail when the file and upstream disagree")
    ap.add_argument("--kernels", help="the kernels' file checked with it (default: e2b-ci-kernels.txt beside --output)")
    a = ap.parse_args(argv)
    try:
        texts = read_upstream(a.source, a.archive)
        pins = upstream_pins(texts)
        out = pathlib.Path(a.output)
        if a.check:
            kernels = pathlib.Path(a.kernels) if a.kernels else out.with_name("e2b-ci-kernels.txt")
            if (a.kernels or kernels.exists()) and not check_kernels(out, kernels):
                return 1
            if not check(texts, pins, out):
                print(f"constraints-gen: {out}: out of date; regenerate with os-image/e2b-ci/constraints-gen.py",
                      file=sys.stderr)
                return 1
            print(f"constraints-gen: {out}: agrees with upstream ({len(pins)} requirements)")
            return 0
        rows = plan(pins)
        installs = resolve(rows, a.python, a.index)
        text = render(texts, rows, installs, a.python, lock_field("version"))
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out)
        print(f"constraints-gen: {out}: {text.count('--hash=sha256:')} wheels for CPython {a.python}, "
              f"{sum(1 for r in rows if r[4])} deviations, {text.count(chr(10) + '# dropped:')} dropped")
        return 0
    except GenError as e:
        print(f"constraints-gen: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
