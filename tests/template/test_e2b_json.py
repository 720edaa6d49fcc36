"""E2B's Template JSON, read before anything is built: JSON written by E2B's
own SDKs (Python `e2b` from PyPI, JS `e2b` from npm, the versions
tests/sdk pins) is read by build/e2b-template and staged by
template/e2b/stage.py, whose filesHash check must agree with both SDKs on
every shape of COPY source (a file, a directory, a glob, `.`, a symlink,
.dockerignore); and every bad input is refused naming the step, its type
and what to do, before mkosi runs."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sdk"))
import sdk_helpers  # noqa: E402
import testimages  # noqa: E402

ROOT = testimages.ROOT
TOOL = ROOT / "build" / "e2b-template"
FLAVORS = "e2b-base e2b-ci e2b-rt"

# (src, dest, resolveSymlinks): each a COPY the SDKs hash differently or walk differently.
COPIES = [
    ("app.py", "/opt/app/", False),
    ("app.py", "app.py", False),
    ("site", "/srv/site", False),
    ("site/**/*.html", "/srv/html/", False),
    ("*.py", "/opt/py/", False),
    ("link-to-app", "/opt/link", False),
    ("link-to-app", "/opt/link", True),
    (".", "/ctx", False),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("sdk") / "sdk-copies"
    (d / "site" / "sub").mkdir(parents=True)
    (d / "app.py").write_text("print('app')\n")
    (d / "tool.py").write_text("print('tool')\n")
    os.chmod(d / "tool.py", 0o755)
    (d / "site" / "index.html").write_text("<p>index</p>\n")
    (d / "site" / "sub" / "deep.html").write_text("<p>deep</p>\n")
    (d / "site" / "notes.log").write_text("ignored\n")
    (d / "link-to-app").symlink_to("app.py")
    (d / ".dockerignore").write_text("# the SDKs leave these out\n*.log\n**/*.log\ne2b.template.json\n")
    return d


def py_json(folder: pathlib.Path, body: str) -> dict:
    script = folder.parent / "make_py.py"
    script.write_text("\n".join(["from e2b import Template, wait_for_port",
                                  f"t = Template(file_context_path={str(folder)!r}).from_template('base')",
                                  body, "print(Template.to_json(t))", ""]))
    cp = subprocess.run([str(sdk_helpers.py_sdk()), str(script)], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)


def js_json(folder: pathlib.Path, body: str) -> dict:
    npm = sdk_helpers.npm_sdk()
    script = npm / "make_template_json.mjs"
    script.write_text("\n".join(["import { Template, waitForPort } from 'e2b'",
                                  f"let t = Template({{ fileContextPath: {json.dumps(str(folder))} }})"
                                  ".fromTemplate('base')",
                                  body, "console.log(await Template.toJSON(t))", ""]))
    cp = subprocess.run(["node", str(script)], cwd=npm, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)


def stage(folder: pathlib.Path, template: dict, tmp: pathlib.Path, timeout=None) -> subprocess.CompletedProcess:
    """build/e2b-template, then template/e2b/stage.py, as template.sh runs them."""
    (folder / "e2b.template.json").write_text(json.dumps(template))
    cp = subprocess.run([str(TOOL), "--dir", str(folder), "--flavors", FLAVORS], capture_output=True, text=True,
                        timeout=timeout)
    if cp.returncode != 0:
        return cp
    normal = tmp / "normal.json"
    normal.write_text(cp.stdout)
    shutil.rmtree(tmp / "tree", ignore_errors=True)
    return subprocess.run(["/usr/bin/python3", "-m", "template.e2b.stage", "--template", str(normal),
                           str(folder), "--tree", str(tmp / "tree"), "--labels", str(tmp / "labels.json")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          timeout=timeout)


@pytest.mark.parametrize("sdk", ["python", "js"])
def test_files_hash_agrees_with_the_sdk(folder, tmp_path, sdk):
    """Every COPY shape, hashed by the real SDK, passes our check; the
    staged tree has the files the SDK would upload (not the ignored)."""
    if sdk == "python":
        body = "\n".join(f"t = t.copy({s!r}, {d!r}, resolve_symlinks={r})" for s, d, r in COPIES)
        t = py_json(folder, body)
    else:
        body = "\n".join(f"t = t.copy({json.dumps(s)}, {json.dumps(d)}, {{ resolveSymlinks: {str(r).lower()} }})"
                         for s, d, r in COPIES)
        t = js_json(folder, body)
    assert [s["args"][0] for s in t["steps"]] == [c[0] for c in COPIES]
    cp = stage(folder, t, tmp_path)
    assert cp.returncode == 0, cp.stderr
    steps = json.loads((tmp_path / "tree/usr/lib/e2b-template-build/steps.json").read_text())["templates"][0]["steps"]
    tree = tmp_path / "tree"
    staged = [tree / s["staged"].lstrip("/") for s in steps]
    assert (staged[2] / "sub/deep.html").is_file()
    assert not (staged[2] / "notes.log").exists()  # .dockerignore
    assert sorted(p.name for p in staged[3].rglob("*.html")) == ["deep.html", "index.html"]
    assert sorted(p.name for p in staged[4].iterdir() if p.suffix == ".py") == ["app.py", "tool.py"]
    assert os.stat(staged[4] / "tool.py").st_mode & 0o777 == 0o755
    # The link itself, then (resolveSymlinks) the file it names, whichever SDK wrote it.
    assert staged[5].is_symlink() and os.readlink(staged[5]) == "app.py"
    assert not staged[6].is_symlink() and staged[6].read_text() == "print('app')\n"
    assert [s["resolveSymlinks"] for s in steps][5:7] == [False, True]


def test_the_json_itself_in_a_copy_is_named(folder, tmp_path):
    """`python3 template.py > e2b.template.json` makes the file before the
    SDK hashes the folder: a COPY of `.` then cannot match unless
    .dockerignore leaves the JSON out, and the refusal says so."""
    work = tmp_path / "noignore"
    shutil.copytree(folder, work, symlinks=True)
    (work / ".dockerignore").write_text("*.log\n**/*.log\n")
    (work / "e2b.template.json").write_text("")
    t = py_json(work, "t = t.copy('.', '/ctx')")
    cp = stage(work, t, tmp_path)
    assert cp.returncode == 1 and "add e2b.template.json to the folder's .dockerignore" in cp.stderr, cp.stderr


def test_a_changed_file_is_refused(folder, tmp_path):
    t = py_json(folder, "t = t.copy('site', '/srv/site')")
    work = tmp_path / "stale"
    shutil.copytree(folder, work, symlinks=True)
    (work / "site" / "sub" / "deep.html").write_text("<p>changed after the JSON was written</p>\n")
    cp = stage(work, t, tmp_path)
    assert cp.returncode == 1
    assert "step 0: COPY site: its files do not hash to the step's filesHash" in cp.stderr, cp.stderr
    # Not only "the folder changed": an older SDK's recipe and fileIgnorePatterns are named too.
    for cause in ("an older SDK, which hashed differently", "fileIgnorePatterns", "has changed since"):
        assert cause in cp.stderr, cp.stderr
    (work / "site" / "sub" / "deep.html").unlink()
    shutil.rmtree(work / "site")
    cp = stage(work, t, tmp_path)
    assert "step 0: COPY site: no files in the template's folder match it" in cp.stderr, cp.stderr


def test_a_source_through_a_symlink_out_of_the_folder_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("the build host's\n")
    d = tmp_path / "escape"
    d.mkdir()
    (d / "data").symlink_to(outside)
    (d / "back").symlink_to(outside / "secret")
    t = {"fromTemplate": "base", "steps": [
        {"type": "COPY", "args": ["data/secret", "/x", "", ""], "filesHash": "0" * 64},
    ]}
    cp = stage(d, t, tmp_path)
    assert cp.returncode == 1 and "data/secret is reached through a symlink that leads out" in cp.stderr, cp.stderr
    t["steps"][0] = {"type": "COPY", "args": ["back", "/x", "", ""], "filesHash": "0" * 64, "resolveSymlinks": True}
    cp = stage(d, t, tmp_path)
    assert cp.returncode == 1 and "back is a symlink out of the template's folder" in cp.stderr, cp.stderr
    os.mkfifo(d / "pipe")
    t["steps"][0] = {"type": "COPY", "args": ["pipe", "/x", "", ""], "filesHash": "0" * 64}
    cp = stage(d, t, tmp_path)
    assert cp.returncode == 1 and "pipe is not a regular file, a directory or a symlink" in cp.stderr, cp.stderr
    t["steps"][0] = {"type": "COPY", "args": ["../outside/secret", "/x", "", ""], "filesHash": "0" * 64}
    cp = stage(d, t, tmp_path)
    assert cp.returncode == 1 and "step 0: COPY: source '../outside/secret'" in cp.stderr, cp.stderr


def test_a_source_linked_out_of_the_folder_is_refused_before_it_is_read(tmp_path):
    """Issue 49, finding 12: the inside-the-folder check runs before a byte
    is hashed. A COPY source linked to a file outside that a read never
    finishes (here a 1 TiB sparse file, standing for /proc/kmsg, which
    blocks) is refused at once, naming the step: resolveSymlinks as the
    JS SDK writes it, and without it (the Python SDK's JSON, where both
    readings are tried)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    endless = outside / "endless"
    with open(endless, "wb") as f:
        f.truncate(1 << 40)
    d = tmp_path / "reads"
    d.mkdir()
    (d / "kmsg").symlink_to(endless)
    for extra in ({"resolveSymlinks": True}, {}):
        t = {"fromTemplate": "base", "steps": [
            {"type": "COPY", "args": ["kmsg", "/x", "", ""], "filesHash": "0" * 64, **extra}]}
        cp = stage(d, t, tmp_path, timeout=30)
        assert cp.returncode == 1, cp.stderr
        assert "step 0: COPY kmsg: kmsg is a symlink out of the template's folder" in cp.stderr, cp.stderr


BAD = [
    ("an unknown step type", {"fromTemplate": "base", "steps": [{"type": "HEALTHCHECK", "args": ["x"]}]},
     "step 0: unknown step type 'HEALTHCHECK'"),
    ("a JSON that is not an object", [1], "not a JSON object"),
    ("neither base", {"steps": []}, "neither fromImage nor fromTemplate"),
    ("itself as its base", {"fromTemplate": "bad-input"}, "'bad-input' is this template itself"),
    ("a RUN without a command", {"fromTemplate": "base", "steps": [{"type": "run", "args": []}]},
     "step 0: RUN takes [command] or [command, user]"),
    ("an odd ENV", {"fromTemplate": "base", "steps": [{"type": "ENV", "args": ["A"]}]},
     "step 0: ENV takes name, value pairs"),
]


@pytest.mark.parametrize("what,template,message", BAD, ids=[b[0] for b in BAD])
def test_bad_json_is_refused(tmp_path, what, template, message):
    d = tmp_path / "bad-input"
    d.mkdir()
    (d / "e2b.template.json").write_text(json.dumps(template))
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 1 and message in cp.stderr, cp.stderr
    assert cp.stdout == ""


def test_too_large_and_both_formats_are_refused(tmp_path):
    d = tmp_path / "big"
    d.mkdir()
    (d / "e2b.template.json").write_text('{"fromTemplate": "base", "steps": [' + " " * (1 << 20) + "]}")
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 1 and "e2b.template.json: larger than 1 MiB" in cp.stderr, cp.stderr
    (d / "template.conf").write_text("name = big\nbase = e2b-rt\n")
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 1 and "both template.conf and e2b.template.json" in cp.stderr, cp.stderr


def test_registry_credentials_stay_out(tmp_path):
    """fromImageRegistry's secrets are not carried into what the build reads."""
    d = tmp_path / "creds"
    d.mkdir()
    (d / "e2b.template.json").write_text(json.dumps({
        "fromImage": "python:3.13", "steps": [],
        "fromImageRegistry": {"type": "registry", "username": "me", "password": "s3cret-of-the-test"}}))
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert "s3cret-of-the-test" not in cp.stdout and json.loads(cp.stdout)["registry_auth"] == "registry"
