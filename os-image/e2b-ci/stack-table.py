#!/usr/bin/env python3
"""The e2b-ci Python stack against upstream's recipe, from a built image.

Compares upstream's template/requirements.txt at the pinned commit (shipped
in the image by prepare.sh as /usr/share/doc/e2b-code-interpreter/
requirements.txt) with the image's package list (OUT/manifest.json) and
prints one Markdown table: each upstream package, its pin, the Debian package
and version we ship, or why none. It refuses to print a table that would be
wrong: a requirement missing from MAP below, a mapped Debian package absent
from the image, or a package said to be unshipped that the image has.

    stack-table.py OUT                  print the table (OUT: out/e2b-ci)
    stack-table.py OUT --check README   exit 1 if README's table differs
    stack-table.py OUT --write README   replace README's table
    stack-table.py OUT --modules        the import names of what we ship (JSON)

OUT holds manifest.json and the build tree (work/mkosi-out/image); or pass
--requirements FILE for a tree that is elsewhere.
"""
import argparse
import json
import pathlib
import re
import sys

DOC = "usr/share/doc/e2b-code-interpreter"
BEGIN = "<!-- stack-table: begin (os-image/e2b-ci/stack-table.py --write; do not edit) -->"
END = "<!-- stack-table: end -->"

# Upstream's name (normalised) -> (Debian package, import names) or
# (None, reason). The only hand-kept facts here; everything else is read.
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


def rows(reqs, manifest):
    shipped = {p["name"]: p["version"] for p in manifest["packages"]}
    commit = next((a.get("version", "") for a in manifest.get("artifacts", [])
                   if a.get("name") == "code-interpreter"), "")
    out = []
    for name, pin in reqs:
        entry = MAP.get(normalise(name))
        if entry is None:
            raise TableError(f"requirements.txt: {name}: not in stack-table.py's MAP; "
                             "add its Debian package (or why there is none) there")
        deb, what = entry
        if deb == "archive":
            out.append((name, pin, "from the pinned archive", f"source at {commit[:12]}", what))
        elif deb is None:
            leaked = sorted(p for p in shipped if re.fullmatch(rf"python3-{re.escape(normalise(name))}", p))
            if leaked:
                raise TableError(f"{name}: MAP says none is shipped, but the image has {leaked[0]}: update MAP")
            out.append((name, pin, "—", what, []))
        elif deb not in shipped:
            raise TableError(f"{name}: {deb} is not in the image's manifest (add it to "
                             "os-image/mkosi.profiles/e2b-ci/mkosi.conf, or change MAP)")
        else:
            out.append((name, pin, deb, shipped[deb], what))
    return out


def table(table_rows, manifest):
    n = sum(1 for r in table_rows if r[4])
    lines = [f"{n} of upstream's {len(table_rows)} requirements ship "
             f"({manifest['release']}, {len(manifest['packages'])} packages in the image).", "",
             "| upstream | upstream's pin | Debian package | we ship | imported as |",
             "|---|---|---|---|---|"]
    for name, pin, deb, version, mods in table_rows:
        lines.append(f"| {name} | {pin or '(latest)'} | {deb} | {version} | "
                     f"{', '.join(f'`{m}`' for m in mods) or '—'} |")
    return "\n".join(lines) + "\n"


def section(readme_text, path):
    if readme_text.count(BEGIN) != 1 or readme_text.count(END) != 1:
        raise TableError(f"{path}: expected one {BEGIN!r} and one {END!r} line")
    head, rest = readme_text.split(BEGIN + "\n", 1)
    body, tail = rest.split(END, 1)
    return head, body, tail


def main(argv):
    ap = argparse.ArgumentParser(prog="stack-table.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=pathlib.Path, help="a build's output directory (out/e2b-ci)")
    ap.add_argument("--requirements", type=pathlib.Path)
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", type=pathlib.Path, metavar="README")
    group.add_argument("--write", type=pathlib.Path, metavar="README")
    group.add_argument("--modules", action="store_true")
    a = ap.parse_args(argv)
    reqs_path = a.requirements or a.out / "work/mkosi-out/image" / DOC / "requirements.txt"
    try:
        if not (a.out / "manifest.json").is_file():
            raise TableError(f"{a.out}/manifest.json: not found (build with `make flavor=e2b-ci` first)")
        if not reqs_path.is_file():
            raise TableError(f"{reqs_path}: not found (an image built from the real pinned archive "
                             "ships upstream's requirements.txt there; or pass --requirements)")
        manifest = json.loads((a.out / "manifest.json").read_text(encoding="utf-8"))
        table_rows = rows(read_requirements(reqs_path), manifest)
        if a.modules:
            print(json.dumps({r[0]: r[4] for r in table_rows if r[4]}, indent=1))
            return 0
        text = table(table_rows, manifest)
        if a.check or a.write:
            path = a.check or a.write
            head, body, tail = section(path.read_text(encoding="utf-8"), path)
            if a.check:
                if body != text:
                    raise TableError(f"{path}: the stack table differs from the image "
                                     f"(run os-image/e2b-ci/stack-table.py {a.out} --write {path}):\n"
                                     f"--- README\n{body}--- image\n{text}")
                print(f"stack-table: {path} matches {a.out}")
            else:
                path.write_text(head + BEGIN + "\n" + text + END + tail, encoding="utf-8")
            return 0
        sys.stdout.write(text)
        return 0
    except (TableError, OSError, ValueError, KeyError) as e:
        print(f"stack-table: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
