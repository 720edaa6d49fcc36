#!/usr/bin/env python3
"""The e2b-ci Python stack against upstream's recipe, from built images.

Compares upstream's template/requirements.txt at the pinned commit (shipped
in the image by prepare.sh as /usr/share/doc/e2b-code-interpreter/
requirements.txt) with what each built image ships, one column per Python
stack: pydeps=debian (the Debian package and its version, from the image's
package list, OUT/manifest.json "packages") and pydeps=pip (the version in the
venv, manifest.json "python_packages", and each deviation from upstream
recorded by constraints-gen.py in the constraints the image ships). It
refuses to print a table that would be wrong: a requirement missing from MAP
below, a mapped package absent from the image, a package said to be
unshipped that the image has, or a pip version that differs from upstream's
pin without a recorded deviation.

    stack-table.py OUT...                  print the table (OUT: out/e2b-ci, one per path)
    stack-table.py OUT... --check README   exit 1 if README's table differs in the
                                           columns of the paths given
    stack-table.py DEBIAN PIP --write README   replace README's table (both paths)
    stack-table.py OUT --modules           the import names of what OUT ships (JSON)

Each OUT holds manifest.json and the build tree (work/mkosi-out/image); which
path it was built with is read from its manifest. --requirements FILE: for a
tree that is elsewhere.
"""
import argparse
import json
import pathlib
import re
import sys

DOC = "usr/share/doc/e2b-code-interpreter"
BEGIN = "<!-- stack-table: begin (os-image/e2b-ci/stack-table.py --write; do not edit) -->"
END = "<!-- stack-table: end -->"
PATHS = ("debian", "pip")
OTHER = "- outside requirements.txt:"
DEVIATION = re.compile(r"^# deviation: (\S+) (\S+) -> (\S+) (\S+): (.+)$")

# Upstream's name (normalised) -> (Debian package, import names) or
# (None, reason). The only hand-kept facts here; everything else is read.
# The import names of what Debian lacks are in PIP_ONLY_MODULES.
NOT_IN_DEBIAN = "no Debian package"
NOT_IN_TRIXIE = "not in trixie (Debian names it, but the release has no installable version)"
MAP = {
    "jupyter-server": ("python3-jupyter-server", ["jupyter_server"]),
    "ipykernel": ("python3-ipykernel", ["ipykernel"]),
    "ipython": ("python3-ipython", ["IPython"]),
    "orjson": ("python3-orjson", ["orjson"]),
    "pandas": ("python3-pandas", ["pandas"]),
    "matplotlib": ("python3-matplotlib", ["matplotlib", "matplotlib.pyplot"]),
    "pillow": ("python3-pil", ["PIL", "PIL.Image"]),
    "e2b-charts": ("archive", ["e2b_charts"]),
    "aiohttp": ("python3-aiohttp", ["aiohttp"]),
    "beautifulsoup4": ("python3-bs4", ["bs4"]),
    "bokeh": (None, NOT_IN_TRIXIE),
    "gensim": (None, NOT_IN_TRIXIE),
    "imageio": ("python3-imageio", ["imageio", "imageio.v3"]),
    "joblib": ("python3-joblib", ["joblib"]),
    "librosa": (None, NOT_IN_DEBIAN),
    "nltk": ("python3-nltk", ["nltk"]),
    "numpy": ("python3-numpy", ["numpy"]),
    "numba": ("python3-numba", ["numba"]),
    "opencv-python": ("python3-opencv", ["cv2"]),
    "openpyxl": ("python3-openpyxl", ["openpyxl"]),
    "plotly": ("python3-plotly", ["plotly", "plotly.express", "plotly.graph_objects"]),
    "kaleido": (None, NOT_IN_DEBIAN),
    "pytest": ("python3-pytest", ["pytest"]),
    "python-docx": ("python3-docx", ["docx"]),
    "pytz": ("python3-tz", ["pytz"]),
    "requests": ("python3-requests", ["requests"]),
    "scikit-image": ("python3-skimage", ["skimage", "skimage.filters", "skimage.io"]),
    "scikit-learn": ("python3-sklearn", ["sklearn", "sklearn.linear_model", "sklearn.ensemble"]),
    "scipy": ("python3-scipy", ["scipy", "scipy.optimize", "scipy.stats", "scipy.signal"]),
    "seaborn": ("python3-seaborn", ["seaborn"]),
    "soundfile": ("python3-soundfile", ["soundfile"]),
    "spacy": (None, NOT_IN_DEBIAN),
    "textblob": (None, NOT_IN_DEBIAN),
    "tornado": ("python3-tornado", ["tornado"]),
    "urllib3": ("python3-urllib3", ["urllib3"]),
    "xarray": ("python3-xarray", ["xarray"]),
    "xlrd": ("python3-xlrd", ["xlrd"]),
    "sympy": ("python3-sympy", ["sympy"]),
}


PIP_ONLY_MODULES = {
    "bokeh": ["bokeh", "bokeh.plotting", "bokeh.embed"],
    "gensim": ["gensim", "gensim.models"],
    "librosa": ["librosa"],
    "kaleido": ["kaleido"],
    "spacy": ["spacy"],
    "textblob": ["textblob"],
}


class TableError(Exception):
    pass


def normalise(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(path):
    """[(name, pin or "")] in file order; only `name` and `name==version`."""
    reqs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:==\s*([^\s;]+))?", line)
        if not m:
            raise TableError(f"{path}:{n}: cannot read {line!r} (expected name or name==version)")
        reqs.append((m.group(1), m.group(2) or ""))
    return reqs


class Build:
    """One built image: its manifest, its tree, and which Python stack it has."""

    def __init__(self, out, requirements=None):
        self.out = out
        if not (out / "manifest.json").is_file():
            raise TableError(f"{out}/manifest.json: not found (build with `make flavor=e2b-ci` first)")
        self.manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        self.tree = out / "work/mkosi-out/image"
        self.path = "pip" if "python_packages" in self.manifest else "debian"
        self.requirements = requirements or self.tree / DOC / "requirements.txt"
        if not self.requirements.is_file():
            raise TableError(f"{self.requirements}: not found (an image built from the real pinned archive "
                             "ships upstream's requirements.txt there; or pass --requirements)")
        self.commit = next((a.get("version", "") for a in self.manifest.get("artifacts", [])
                            if a.get("name") == "code-interpreter"), "")

    def deviation_lines(self):
        """The recorded deviations (DEVIATION matches), in the constraints
        shipped beside requirements.txt (prepare.sh)."""
        out = []
        for f in sorted((self.requirements.parent / "constraints").glob("*.txt")):
            out += [m for m in map(DEVIATION.match, f.read_text(encoding="utf-8").splitlines()) if m]
        return out

    def deviations(self):
        return {normalise(m.group(1)): m.groups()[2:] for m in self.deviation_lines()}


def other_deviations(reqs, builds):
    """Deviations of what upstream installs outside its requirements.txt (the
    kernels' packages, constraints/e2b-ci-kernels.txt), one line each, from
    the constraints the builds ship."""
    names = {normalise(name) for name, _pin in reqs}
    found = {m.group(0) for b in builds.values() for m in b.deviation_lines() if normalise(m.group(1)) not in names}
    return [OTHER + " " + DEVIATION.sub(r"`\1` \2 → `\3` \4: \5", line) for line in sorted(found)]


def debian_cell(name, build):
    """(Debian package, version, import names) for NAME in a pydeps=debian image."""
    shipped = {p["name"]: p["version"] for p in build.manifest["packages"]}
    deb, what = MAP[normalise(name)]
    if deb == "archive":
        return "from the pinned archive", f"source at {build.commit[:12]}", what
    if deb is None:
        leaked = sorted(p for p in shipped if re.fullmatch(rf"python3-{re.escape(normalise(name))}", p))
        if leaked:
            raise TableError(f"{name}: MAP says none is shipped, but the image has {leaked[0]}: update MAP")
        return "—", what, []
    if deb not in shipped:
        raise TableError(f"{name}: {deb} is not in the image's manifest (add it to "
                         "os-image/mkosi.profiles/e2b-ci/mkosi.conf.d/10-pydeps-debian.conf, or change MAP)")
    return deb, shipped[deb], what


def pip_cell(name, pin, build, devs):
    """(what ships, import names) for NAME in a pydeps=pip image."""
    venv = {normalise(p["name"]): p["version"] for p in build.manifest["python_packages"]}
    deb, what = MAP[normalise(name)]
    mods = what if deb else PIP_ONLY_MODULES[normalise(name)]
    dev = devs.get(normalise(name))
    if dev and dev[0] == "-":
        return f"from the pinned archive (source at {build.commit[:12]})", mods
    ours, ourver, why = dev if dev else (name, pin, "")
    got = venv.get(normalise(ours))
    if got is None:
        raise TableError(f"{name}: {ours} is not in the venv of {build.out} (manifest.json python_packages)")
    if pin and not dev and got != pin:
        raise TableError(f"{name}: the venv has {got}, upstream pins {pin}, and no deviation is recorded")
    if dev:
        return f"{ours} {got} (deviation: {why})", mods
    return ("= " if got == pin else "") + got, mods


def rows(reqs, builds):
    """One row per requirement: name, pin, {path: cells}, import names."""
    out = []
    devs = builds["pip"].deviations() if "pip" in builds else {}
    for name, pin in reqs:
        if normalise(name) not in MAP:
            raise TableError(f"requirements.txt: {name}: not in stack-table.py's MAP; "
                             "add its Debian package (or why there is none) there")
        cells, mods = {}, {}
        if "debian" in builds:
            deb, version, mods["debian"] = debian_cell(name, builds["debian"])
            cells["debian"] = [deb, version]
        if "pip" in builds:
            what, mods["pip"] = pip_cell(name, pin, builds["pip"], devs)
            cells["pip"] = [what]
        out.append((name, pin, cells, mods))
    return out


def summary(table_rows, builds):
    lines = {}
    n = len(table_rows)
    if "debian" in builds:
        b = builds["debian"]
        ship = sum(1 for r in table_rows if r[3]["debian"])
        same = sum(1 for r in table_rows if r[1] and r[2]["debian"][1].split("-")[0].split("+")[0].split(":")[-1] == r[1])
        lines["debian"] = (f"pydeps=debian: {ship} of upstream's {n} requirements ship, {same} at upstream's "
                           f"version ({b.manifest['release']}, {len(b.manifest['packages'])} packages in the image).")
    if "pip" in builds:
        b = builds["pip"]
        same = sum(1 for r in table_rows if r[2]["pip"][0].startswith("= "))
        devs = sum(1 for r in table_rows if "(deviation:" in r[2]["pip"][0] or "pinned archive" in r[2]["pip"][0])
        lines["pip"] = (f"pydeps=pip: {sum(1 for r in table_rows if r[3]['pip'])} of upstream's {n} requirements ship, "
                        f"{same} at upstream's version, {devs} recorded deviations "
                        f"({len(b.manifest['python_packages'])} Python packages in the venv, "
                        f"{len(b.manifest['packages'])} Debian packages in the image).")
    return lines


def table(table_rows, builds):
    """{line key: text}: the summary lines and one line per requirement; the
    cells of a path not given are None (not compared by --check)."""
    lines = summary(table_rows, builds)
    head = ["| upstream | upstream's pin | pydeps=debian: package | version | pydeps=pip (`=`: upstream's version) | imported as |",
            "|---|---|---|---|---|---|"]
    body = []
    for name, pin, cells, mods in table_rows:
        deb = cells.get("debian", [None, None])
        pip = cells.get("pip", [None])
        names = sorted({m for ms in mods.values() for m in ms}, key=lambda m: (m.count("."), m))
        body.append([name, pin or "(latest)", *deb, *pip, ", ".join(f"`{m}`" for m in names) or "—"])
    return lines, head, body


def render(lines, head, body, others=()):
    out = [lines.get(p) for p in PATHS if lines.get(p)] + [""] + head
    out += ["| " + " | ".join(c for c in row) + " |" for row in body]
    out += ["", *others] if others else []
    return "\n".join(out) + "\n"


def parse(text):
    """The README's table, back into (summary lines, rows of cells)."""
    lines, body, others = {}, [], []
    for line in text.splitlines():
        if line.startswith(OTHER):
            others.append(line)
        for p in PATHS:
            if line.startswith(f"pydeps={p}:"):
                lines[p] = line
        if line.startswith("| ") and not line.startswith("| upstream |"):
            body.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return lines, body, others


def compare(readme_text, lines, body, builds, others=()):
    """Differences between the README's table and the images, in the columns
    of the paths given (import names only when both are)."""
    have_lines, have_body, have_others = parse(readme_text)
    diffs = [f"summary: README {have_lines.get(p)!r}, image {lines[p]!r}" for p in lines if have_lines.get(p) != lines[p]]
    diffs += [f"README has {o!r}, the image does not" for o in have_others if o not in others]
    diffs += [f"the image has {o!r}, the README does not" for o in others if o not in have_others]
    if len(have_body) != len(body):
        return diffs + [f"README has {len(have_body)} rows, the image {len(body)}"]
    cols = [0, 1] + ([2, 3] if "debian" in builds else []) + ([4] if "pip" in builds else [])
    cols += [5] if len(builds) == len(PATHS) else []
    for have, want in zip(have_body, body):
        for c in cols:
            if c >= len(have) or have[c] != want[c]:
                diffs.append(f"{want[0]}: column {c + 1}: README {have[c] if c < len(have) else None!r}, "
                             f"image {want[c]!r}")
    return diffs


def section(readme_text, path):
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1:
        raise TableError(f"{path}: expected one {BEGIN!r} and one {END!r} line")
    head, rest = readme_text.split(BEGIN + "\n", 1)
    body, tail = rest.split(END, 1)
    return head, body, tail


def main(argv):
    ap = argparse.ArgumentParser(prog="stack-table.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path, nargs="+", help="a build's output directory (out/e2b-ci), one per path")
    ap.add_argument("--requirements", type=pathlib.Path)
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", type=pathlib.Path, metavar="README")
    group.add_argument("--write", type=pathlib.Path, metavar="README")
    group.add_argument("--modules", action="store_true")
    a = ap.parse_args(argv)
    try:
        builds = {}
        for out in a.out:
            b = Build(out, a.requirements)
            if b.path in builds:
                raise TableError(f"{out} and {builds[b.path].out}: both are pydeps={b.path} builds")
            builds[b.path] = b
        first = builds[next(iter(builds))]
        reqs = read_requirements(first.requirements)
        table_rows = rows(reqs, builds)
        others = other_deviations(reqs, builds)
        if a.modules:
            if len(builds) != 1:
                raise TableError("--modules takes one build")
            print(json.dumps({r[0]: r[3][first.path] for r in table_rows if r[3][first.path]}, indent=1))
            return 0
        lines, head, body = table(table_rows, builds)
        if a.check:
            text = section(a.check.read_text(encoding="utf-8"), a.check)[1]
            diffs = compare(text, lines, body, builds, others)
            if diffs:
                raise TableError(f"{a.check}: the stack table differs from the image (run os-image/e2b-ci/"
                                 f"stack-table.py DEBIAN-OUT PIP-OUT --write {a.check}):\n" + "\n".join(diffs))
            print(f"stack-table: {a.check} matches {', '.join(str(o) for o in a.out)}")
            return 0
        if a.write:
            if len(builds) != len(PATHS):
                raise TableError("--write needs both builds, a pydeps=debian and a pydeps=pip one")
            head_text, _body, tail = section(a.write.read_text(encoding="utf-8"), a.write)
            a.write.write_text(head_text + BEGIN + "\n" + render(lines, head, body, others) + END + tail, encoding="utf-8")
            return 0
        body = [[c if c is not None else "" for c in row] for row in body]
        sys.stdout.write(render(lines, head, body, others))
        return 0
    except (TableError, OSError, ValueError, KeyError) as e:
        print(f"stack-table: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
