"""Upstream's own code-interpreter template (e2b-dev/code-interpreter at the
pinned commit, template/template.py), run through the real SDK's to_json,
as its build_prod.py builds it: which of its steps our reader and staging
accept as they are, and which fetch from the network, unpinned. It is a
report, printed, and a check that it stays true; it does not pretend that
upstream's template reproduces."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sdk"))
import sdk_helpers  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT
NETWORK = re.compile(r"apt-get (update|install)|pip install|npm install|curl |wget |git\+https|git clone|install\.packages")
# Fetches whose source or version is not fixed by the step itself.
UNPINNED = {
    "curl | bash": re.compile(r"curl [^|]*\| *bash"),
    "a git URL without a ref": re.compile(r"git\+https://[^ #]+\.git(?![#@])"),
    "CRAN's latest": re.compile(r"install\.packages\("),
    "a download without a checksum": re.compile(r"(curl|wget) [^|;&]*https://\S+\.(tar\.gz|zip)"),
}


def unversioned_pip(command: str) -> bool:
    """`pip install NAME` with NAME not pinned (==); -r files are not read."""
    for part in command.split("&&"):
        words = part.split()
        if "pip" in " ".join(words[:2]) and "install" in words:
            args = words[words.index("install") + 1:]
            names = [w for i, w in enumerate(args) if not w.startswith("-") and (i == 0 or args[i - 1] != "-r")]
            if any("==" not in n for n in names):
                return True
    return False


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    archive = testimages.upstream_archive()
    if archive is None:
        pytest.skip(f"no git archive of the pinned commit in {testimages.UPSTREAM_DIR} (set E2B_UPSTREAM_DIR)")
    d = tmp_path_factory.mktemp("upstream")
    subprocess.run(["tar", "-xzf", str(archive), "-C", str(d), "--wildcards", "*/template/*"], check=True)
    folder = next(d.glob("*/template"))
    target = d / "code-interpreter"
    folder.rename(target)
    cp = subprocess.run([str(sdk_helpers.py_sdk()), "-c",
                         "from template import make_template; from e2b import Template; "
                         "print(Template.to_json(make_template()))"],
                        cwd=target, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    (target / "e2b.template.json").write_text(cp.stdout)
    return target, json.loads(cp.stdout)


def test_our_reader_and_staging_accept_every_step(upstream, tmp_path):
    folder, t = upstream
    cp = subprocess.run([str(ROOT / "build/e2b-template"), "--dir", str(folder), "--flavors", "e2b-base e2b-ci e2b-rt"],
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    normal = json.loads(cp.stdout)
    assert len(normal["steps"]) == len(t["steps"]) >= 25
    assert normal["from"] == {"kind": "image", "ref": t["fromImage"]}
    (tmp_path / "normal.json").write_text(cp.stdout)
    cp = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.stage", "--template",
                         str(tmp_path / "normal.json"), str(folder), "--tree", str(tmp_path / "tree"),
                         "--labels", str(tmp_path / "labels.json")], capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stderr  # every COPY's files hash as the SDK hashed them


def test_which_steps_need_the_network_and_which_are_unpinned(upstream):
    _, t = upstream
    report, unpinned = [], {}
    for i, s in enumerate(t["steps"]):
        text = " ".join(s["args"])
        needs = bool(NETWORK.search(text)) if s["type"] == "RUN" else False
        why = [name for name, rx in UNPINNED.items() if s["type"] == "RUN" and rx.search(text)]
        if s["type"] == "RUN" and unversioned_pip(s["args"][0]):
            why.append("a pip package without a version")
        for name in why:
            unpinned.setdefault(name, []).append(i)
        report.append(f"{i:2} {s['type']:7} {'network' if needs else '-':7} {', '.join(why) or '-':30} {text[:70]}")
    print("\nupstream's template, step by step (index, type, network, unpinned, args):")
    print("\n".join(report))
    print(f"fromImage {t['fromImage']} (a tag, not a digest); unpinned: {unpinned}")
    assert "@sha256:" not in t["fromImage"]
    # What the issue names, each found by the report.
    assert unpinned.get("curl | bash") and unpinned.get("a git URL without a ref") and unpinned.get("CRAN's latest")
    assert unpinned.get("a download without a checksum") and unpinned.get("a pip package without a version")
