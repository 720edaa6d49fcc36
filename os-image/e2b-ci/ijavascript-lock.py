#!/usr/bin/python3
"""Generate recipes/ijavascript/package.json and package-lock.json (the
javascript kernel's npm closure) from the ijavascript tree pinned in
recipes/ijavascript.lock.

    ijavascript-lock.py [--trees DIR | --mirror PREFIX... [--offline] [--cache DIR]] [--recipes DIR]
    ijavascript-lock.py --check [--trees DIR | --mirror PREFIX... [--cache DIR]] [--recipes DIR]

Input: the three pinned trees (ijavascript, nel, ijavascript-babel), either
already fetched and verified into DIR/<name> (--trees; ijavascript-stage.sh
has them there) or fetched here with build/pinfetch through its cache
(out/cache/pinfetch) and the given pin mirrors, which verifies each against
its tree_sha256.

package.json is ijavascript's own with devDependencies dropped and its two
git dependencies (unpinned branch heads upstream) rewritten to the pinned
trees: nel -> file:vendor/nel, ijavascript-babel -> file:vendor/ijavascript-babel.
The lock is npm's (`npm install --package-lock-only --ignore-scripts
--omit=dev --install-links --omit-lockfile-registry-resolved`): every
registry package with its sha512 integrity and no registry URL (npm fetches
from the machine's configured registry and checks the integrity), the two
file: trees by path (their tree pins cover them). Versions resolve on the
day the lock is made; upstream resolves at every build.

Helpers for os-image/e2b-ci/ijavascript-stage.sh: --explain-npm LOG turns
npm's failure into one line naming the package; --record FILE writes what
was staged (the pins, the lock's sha256 and package count).

--check (offline: the trees from --trees, or from pinfetch's cache and
file:// mirrors; npm is not run): exit 1, naming the field, when package.json no longer
matches the pinned tree, or the lock disagrees with package.json, lacks an
integrity for a registry package, or names a registry URL.
"""
import argparse
import configparser
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.parse

HERE = pathlib.Path(__file__).resolve().parent
TOP = HERE.parent.parent
TREES = ("ijavascript", "nel", "ijavascript-babel")
# dependency key in ijavascript's package.json -> the pinned tree that replaces its git URL
VENDORED = {"nel": "nel", "ijavascript-babel": "ijavascript-babel"}
NPM_LOCK_ARGS = ["--package-lock-only", "--ignore-scripts", "--omit=dev", "--install-links",
                 "--omit-lockfile-registry-resolved", "--no-audit", "--no-fund"]


class GenError(Exception):
    pass


def fetch_trees(recipes, dest, cache, mirrors, offline):
    """Fetch and verify the pinned trees into DEST/<name> with pinfetch."""
    pinfetch = TOP / "build" / "pinfetch"
    if not pinfetch.is_file():
        raise GenError(f"{pinfetch}: not built (run `make tools`)")
    lock = recipes / "ijavascript.lock"
    for name in TREES:
        cmd = [str(pinfetch), "--lock", str(lock), "--name", name, "--output", str(dest / name),
               "--cache", str(cache), "--quiet"]
        for m in mirrors:
            cmd += ["--mirror", m]
        if offline:
            cmd.append("--offline")
        if subprocess.run(cmd).returncode != 0:
            raise GenError(f"{lock}: [{name}] could not be fetched or did not verify "
                           "(pass --mirror PREFIX, or --trees DIR with the verified trees)")


def expected_package_json(trees):
    """Our package.json (an ordered dict) from the pinned ijavascript tree."""
    src = trees / "ijavascript" / "package.json"
    try:
        pkg = json.loads(src.read_text())
    except (OSError, ValueError) as e:
        raise GenError(f"{src}: {e} (is --trees the directory holding the pinned ijavascript tree?)")
    pkg.pop("devDependencies", None)
    deps = pkg.get("dependencies", {})
    for key, tree in VENDORED.items():
        if key not in deps:
            raise GenError(f"{src}: dependencies has no {key!r} (upstream's layout changed; "
                           "update VENDORED in this script)")
        deps[key] = f"file:vendor/{tree}"
    return pkg


def render(obj):
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def lock_problems(pkg, lock, where):
    """What is wrong with LOCK (parsed) for package.json PKG, as messages."""
    problems = []
    if lock.get("lockfileVersion") != 3:
        problems.append(f"{where}: lockfileVersion is {lock.get('lockfileVersion')!r}, not 3")
    packages = lock.get("packages") or {}
    root = packages.get("", {})
    if root.get("dependencies") != pkg.get("dependencies"):
        problems.append(f"{where}: packages[\"\"].dependencies differs from package.json's dependencies "
                        "(stale lock)")
    for path, entry in sorted(packages.items()):
        if not path:
            continue
        name = path.rsplit("node_modules/", 1)[-1]
        label = f"{name}@{entry.get('version', '?')}"
        resolved = entry.get("resolved", "")
        if resolved.startswith("file:"):
            continue
        if resolved:
            problems.append(f"{where}: {label}: has a registry URL in resolved; regenerate "
                            "(the lock must not name a host)")
        if entry.get("link"):
            problems.append(f"{where}: {label}: is a link; regenerate with --install-links")
        elif not str(entry.get("integrity", "")).startswith("sha512-"):
            problems.append(f"{where}: {label}: has no sha512 integrity")
    return problems


def check(recipes, trees):
    problems = []
    want = expected_package_json(trees)
    ours_path = recipes / "ijavascript" / "package.json"
    try:
        ours = json.loads(ours_path.read_text())
    except (OSError, ValueError) as e:
        raise GenError(f"{ours_path}: {e} (run os-image/e2b-ci/ijavascript-lock.py)")
    for field in sorted(set(want) | set(ours)):
        if want.get(field) != ours.get(field):
            detail = ""
            if isinstance(want.get(field), dict) and isinstance(ours.get(field), dict):
                keys = sorted(k for k in set(want[field]) | set(ours[field])
                              if want[field].get(k) != ours[field].get(k))
                detail = f" ({', '.join(keys)})"
            problems.append(f"{ours_path}: field {field!r}{detail} differs from the pinned "
                            f"ijavascript tree's package.json")
    lock_path = recipes / "ijavascript" / "package-lock.json"
    try:
        lock = json.loads(lock_path.read_text())
    except (OSError, ValueError) as e:
        raise GenError(f"{lock_path}: {e} (run os-image/e2b-ci/ijavascript-lock.py)")
    problems += lock_problems(ours, lock, str(lock_path))
    return problems


def generate(recipes, trees):
    pkg = expected_package_json(trees)
    with tempfile.TemporaryDirectory(prefix="ijavascript-lock-") as tmp:
        app = pathlib.Path(tmp)
        (app / "package.json").write_text(render(pkg))
        for tree in VENDORED.values():
            shutil.copytree(trees / tree, app / "vendor" / tree, symlinks=True)
        cp = subprocess.run(["npm", "install", *NPM_LOCK_ARGS], cwd=app, capture_output=True, text=True)
        if cp.returncode != 0:
            sys.stderr.write(cp.stderr)
            raise GenError(f"npm install --package-lock-only failed in {app} (exit {cp.returncode})")
        lock = json.loads((app / "package-lock.json").read_text())
    problems = lock_problems(pkg, lock, "the generated lock")
    if problems:
        raise GenError("; ".join(problems))
    out = recipes / "ijavascript"
    out.mkdir(parents=True, exist_ok=True)
    for name, obj in (("package.json", pkg), ("package-lock.json", lock)):
        tmp = out / f".{name}.tmp"
        tmp.write_text(render(obj))
        tmp.replace(out / name)
    count = sum(1 for p in lock["packages"] if p)
    print(f"ijavascript-lock: wrote {out}/package.json and package-lock.json ({count} packages)")


def lock_entry_by_integrity(lock, integrity):
    for path, entry in (lock.get("packages") or {}).items():
        if path and entry.get("integrity") == integrity:
            return f"{path.rsplit('node_modules/', 1)[-1]}@{entry.get('version', '?')}"
    return None


def explain_npm(log, recipes, cache):
    """One line naming the package for npm's failure in LOG (its output), or
    None when it is none of the known kinds."""
    text = pathlib.Path(log).read_text(errors="replace")
    lock_path = recipes / "ijavascript" / "package-lock.json"
    m = re.search(r"wanted (sha512-\S+?) but got (sha512-\S+?)\.?\s", text)
    if "EINTEGRITY" in text and m:
        lock = json.loads(lock_path.read_text())
        who = lock_entry_by_integrity(lock, m.group(1)) or f"the package locked as {m.group(1)}"
        return (f"{who}: the tarball does not match the lock's integrity ({lock_path}: wanted "
                f"{m.group(1)}, got {m.group(2)}); the registry or the npm cache ({cache}) serves "
                "other bytes, or the lock was edited: regenerate it with os-image/e2b-ci/ijavascript-lock.py "
                "only if the change is expected")
    m = re.search(r"ENOTCACHED.*?request to (\S+) failed", text, re.S)
    if m:
        path = urllib.parse.urlsplit(m.group(1)).path
        name = urllib.parse.unquote(path.split("/-/", 1)[0]).strip("/")
        name = re.sub(r"^.*?((@[^/]+/)?[^/@]+)$", r"\1", name)
        return (f"{name}: not in the npm cache ({cache}) and offline=1; run the build once online "
                "(without offline=1) to fill it")
    if "EUSAGE" in text and "in sync" in text:
        return (f"{lock_path} does not match package.json (stale lock); run "
                "os-image/e2b-ci/ijavascript-lock.py")
    return None


def record(recipes, out):
    """The staged kernel's record: the three pins, the lock's sha256 and package count."""
    pins = configparser.ConfigParser(interpolation=None)
    pins.read(recipes / "ijavascript.lock")
    lock_path = recipes / "ijavascript" / "package-lock.json"
    data = lock_path.read_bytes()
    lock = json.loads(data)
    rec = {
        "npm_lock_sha256": hashlib.sha256(data).hexdigest(),
        "npm_packages": sum(1 for p in lock["packages"] if p),
        "trees": {name: {"version": pins[name]["version"], "tree_sha256": pins[name]["tree_sha256"]}
                  for name in TREES},
    }
    pathlib.Path(out).write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", help="a directory holding the verified trees as ijavascript/, nel/, "
                    "ijavascript-babel/ (default: fetch them with pinfetch)")
    ap.add_argument("--recipes", default=str(TOP / "recipes"))
    ap.add_argument("--cache", default=str(TOP / "out" / "cache" / "pinfetch"), help="pinfetch's cache")
    ap.add_argument("--mirror", action="append", default=[], help="a pinfetch mirror prefix (repeatable)")
    ap.add_argument("--offline", action="store_true", help="pinfetch from its cache and file:// mirrors only")
    ap.add_argument("--check", action="store_true", help="fail when the files and the pinned tree disagree")
    ap.add_argument("--explain-npm", metavar="LOG", help=argparse.SUPPRESS)  # for ijavascript-stage.sh
    ap.add_argument("--npm-cache", default="", help=argparse.SUPPRESS)
    ap.add_argument("--record", metavar="FILE", help=argparse.SUPPRESS)  # for ijavascript-stage.sh
    args = ap.parse_args(argv)
    recipes = pathlib.Path(args.recipes)
    try:
        if args.explain_npm:
            msg = explain_npm(args.explain_npm, recipes, args.npm_cache)
            if msg:
                print(msg)
            return 0 if msg else 1
        if args.record:
            record(recipes, args.record)
            return 0
        with tempfile.TemporaryDirectory(prefix="ijavascript-trees-") as tmp:
            trees = pathlib.Path(args.trees) if args.trees else pathlib.Path(tmp)
            if not args.trees:
                fetch_trees(recipes, trees, args.cache, args.mirror, args.offline or args.check)
            if args.check:
                problems = check(recipes, trees)
                for p in problems:
                    print(f"ijavascript-lock: {p}", file=sys.stderr)
                if problems:
                    print("ijavascript-lock: run os-image/e2b-ci/ijavascript-lock.py to regenerate",
                          file=sys.stderr)
                    return 1
                print("ijavascript-lock: recipes/ijavascript agrees with the pinned tree")
                return 0
            generate(recipes, trees)
            return 0
    except GenError as e:
        print(f"ijavascript-lock: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
