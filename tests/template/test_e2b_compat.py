"""What E2B users' templates say, read as E2B's build takes it (issue 50),
before anything is built: E2B's names for its templates and images are our
flavors (base and e2bdev/base: e2b-base; code-interpreter: e2b-ci); every
SDK helper a template on them uses is read and passed through as the real
SDKs (Python `e2b` from PyPI, JS `e2b` from npm, the versions tests/sdk pins)
write it, bun_install refused naming bun; numeric users; and the refusals
name the file, the key and what to do. Whether the helpers' commands succeed
in the image is for a real build of e2b-base and e2b-ci."""
import json
import os
import pathlib
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
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

# Every helper of the SDKs' template builders that is a step, with the
# options that change what it writes; then numeric users (USER 1000,
# USER 1000:1000, RUN as 1000, COPY owned by 1000:1000).
PY_HELPERS = """
t = (t.pip_install(["numpy", "pandas==2.2.3"]).pip_install("requests", g=False).pip_install()
     .npm_install("express").npm_install(["typescript", "tsx"], g=True).npm_install("vitest", dev=True).npm_install()
     .apt_install(["vim", "jq"], no_install_recommends=True, fix_missing=True).apt_install("curl")
     .git_clone("https://github.com/e2b-dev/e2b.git", "/app/repo", branch="main", depth=1, user="root")
     .git_clone("https://github.com/e2b-dev/e2b.git")
     .make_dir(["/app/data", "/app/logs"], mode=0o755, user="root").make_dir("data")
     .make_symlink("/usr/bin/python3", "/usr/local/bin/py", force=True, user="root")
     .remove("/tmp/x y", recursive=True, force=True).rename("/tmp/a", "/tmp/b", force=True, user="root")
     .set_user("1000").set_user("1000:1000").run_cmd("id", user="1000")
     .copy("app.py", "/app/", user="1000:1000", mode=0o644))
"""
JS_HELPERS = """
t = t.pipInstall(['numpy', 'pandas==2.2.3']).pipInstall('requests', { g: false }).pipInstall()
  .npmInstall('express').npmInstall(['typescript', 'tsx'], { g: true }).npmInstall('vitest', { dev: true })
  .npmInstall()
  .aptInstall(['vim', 'jq'], { noInstallRecommends: true, fixMissing: true }).aptInstall('curl')
  .gitClone('https://github.com/e2b-dev/e2b.git', '/app/repo', { branch: 'main', depth: 1, user: 'root' })
  .gitClone('https://github.com/e2b-dev/e2b.git')
  .makeDir(['/app/data', '/app/logs'], { mode: 0o755, user: 'root' }).makeDir('data')
  .makeSymlink('/usr/bin/python3', '/usr/local/bin/py', { force: true, user: 'root' })
  .remove('/tmp/x y', { recursive: true, force: true }).rename('/tmp/a', '/tmp/b', { force: true, user: 'root' })
  .setUser('1000').setUser('1000:1000').runCmd('id', { user: '1000' })
  .copy('app.py', '/app/', { user: '1000:1000', mode: 0o644 })
"""
FLAVOR_OF = {"base": "e2b-base", "code-interpreter": "e2b-ci", "code-interpreter-v1": "e2b-ci"}


def folder(tmp_path: pathlib.Path, name: str = "compat") -> pathlib.Path:
    d = tmp_path / name
    d.mkdir()
    (d / "app.py").write_text("print('app')\n")
    (d / ".dockerignore").write_text("e2b.template.json\n")
    return d


def py_json(d: pathlib.Path, start: str, body: str) -> dict:
    """What the real Python SDK writes for Template(...)START, then BODY on t."""
    script = d.parent / "make_py.py"
    script.write_text("\n".join(["from e2b import Template", f"t = Template(file_context_path={str(d)!r}){start}",
                                 body, "print(Template.to_json(t))", ""]))
    cp = subprocess.run([str(sdk_helpers.py_sdk()), str(script)], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)


def js_json(d: pathlib.Path, start: str, body: str) -> dict:
    """What the real JS SDK writes for Template(...)START, then BODY on t."""
    npm = sdk_helpers.npm_sdk()
    script = npm / "make_compat_json.mjs"
    script.write_text("\n".join(["import { Template } from 'e2b'",
                                 f"let t = Template({{ fileContextPath: {json.dumps(str(d))} }}){start}",
                                 body, "console.log(await Template.toJSON(t))", ""]))
    cp = subprocess.run(["node", str(script)], cwd=npm, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)


def read(d: pathlib.Path, template: dict | None = None) -> subprocess.CompletedProcess:
    """build/e2b-template on D (with TEMPLATE written as its JSON first)."""
    if template is not None:
        (d / "e2b.template.json").write_text(json.dumps(template))
    return subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)


def stage(d: pathlib.Path, normal: str, tmp: pathlib.Path, meta: pathlib.Path | None = None) -> dict:
    """template/e2b/stage.py on the normal form, as template.sh runs it: the label inputs."""
    (tmp / "normal.json").write_text(normal)
    cp = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.stage", "--template", str(tmp / "normal.json"),
                         str(d), "--tree", str(tmp / "tree"), "--labels", str(tmp / "labels.json"),
                         *(["--meta", str(meta)] if meta else [])], capture_output=True, text=True, env=ENV)
    assert cp.returncode == 0, cp.stderr
    return json.loads((tmp / "labels.json").read_text())


@pytest.mark.parametrize("sdk", ["python", "js"])
@pytest.mark.parametrize("base", ["base", "code-interpreter", "code-interpreter-v1"])
def test_the_sdks_helpers_are_read_on_e2bs_templates(tmp_path, sdk, base):
    """pip_install, npm_install, apt_install, git_clone, make_dir,
    make_symlink, remove, rename and numeric users, as each SDK writes them
    on fromTemplate base (e2b-base) and code-interpreter (e2b-ci): every step
    read, its args passed through unchanged (the user too, e.g. root for a
    global install), and staged."""
    d = folder(tmp_path)
    start = f".from_template({base!r})" if sdk == "python" else f".fromTemplate({base!r})"
    t = (py_json if sdk == "python" else js_json)(d, start, PY_HELPERS if sdk == "python" else JS_HELPERS)
    commands = [s["args"][0] for s in t["steps"] if s["type"] == "RUN"]
    assert "pip install numpy pandas==2.2.3" in commands and "npm install -g typescript tsx" in commands
    assert any(c.startswith("apt-get update && ") for c in commands) and "rm -r -f '/tmp/x y'" in commands
    cp = read(d, t)
    assert cp.returncode == 0, cp.stderr
    n = json.loads(cp.stdout)
    assert n["from"] == {"kind": "flavor", "name": FLAVOR_OF[base], "as": base}
    assert [(s["type"], s["args"][:len(x["args"])]) for s, x in zip(n["steps"], t["steps"])] == \
        [(x["type"], x["args"]) for x in t["steps"]]
    users = [s["args"][1] for s in n["steps"] if s["type"] == "RUN" and len(s["args"]) > 1]
    assert users.count("root") >= 5 and "1000" in users
    assert ["1000"] in [s["args"] for s in n["steps"] if s["type"] == "USER"]
    assert n["steps"][-1]["args"][2] == "1000:1000"
    stage(d, cp.stdout, tmp_path)


@pytest.mark.parametrize("sdk,start", [("python", ".from_base_image()"), ("js", ""), ("js", ".fromBaseImage()")])
def test_the_sdks_default_base_is_e2b_base(tmp_path, sdk, start):
    """Template() with no base (JS) and from_base_image() write fromImage
    "e2bdev/base", E2B's default sandbox: e2b-base, not a registry pull."""
    d = folder(tmp_path)
    t = (py_json if sdk == "python" else js_json)(d, start, "t = t.run_cmd('true')" if sdk == "python"
                                                  else "t = t.runCmd('true')")
    assert t["fromImage"] == "e2bdev/base"
    cp = read(d, t)
    assert cp.returncode == 0 and json.loads(cp.stdout)["from"] == {"kind": "flavor", "name": "e2b-base",
                                                                     "as": "base"}, cp.stderr


@pytest.mark.parametrize("sdk", ["python", "js"])
@pytest.mark.parametrize("base", ["base", "code-interpreter"])
def test_bun_install_is_refused_naming_bun(tmp_path, sdk, base):
    """None of our flavors has bun: bun_install on one is refused before
    anything is built, naming bun and what to do; after a step that installs
    bun it is read; on a registry image (from_bun_image) it is the image's."""
    d = folder(tmp_path)
    py = sdk == "python"
    start = f".from_template({base!r})" if py else f".fromTemplate({base!r})"
    make = py_json if py else js_json
    t = make(d, start, "t = t.bun_install('zod').bun_install('tsx', g=True)" if py
             else "t = t.bunInstall('zod').bunInstall('tsx', { g: true })")
    cp = read(d, t)
    assert cp.returncode == 1 and cp.stdout == ""
    assert f"{d}/e2b.template.json: step 0: RUN `bun install ...` (the SDK's bun_install): bun is missing from " \
           f"the image ({FLAVOR_OF[base]};" in cp.stderr, cp.stderr
    assert "install bun in an earlier RUN step (`npm install -g bun`, as root) or use npm_install" in cp.stderr
    t = make(d, start, "t = t.npm_install('bun', g=True).bun_install('zod')" if py
             else "t = t.npmInstall('bun', { g: true }).bunInstall('zod')")
    assert read(d, t).returncode == 0
    t = make(d, ".from_bun_image()" if py else ".fromBunImage()", "t = t.bun_install('zod')" if py
             else "t = t.bunInstall('zod')")
    cp = read(d, t)
    assert cp.returncode == 0 and json.loads(cp.stdout)["from"]["kind"] == "image", cp.stderr


def test_a_dockerfiles_numeric_user_through_the_sdks_parser(tmp_path):
    """USER 1000 and COPY --chown=1000:1000 in an e2b.Dockerfile, converted
    by E2B's parser (template/e2b/dockerfile.py), are read."""
    try:
        from template.e2b import sdk_venv
        sdk = sdk_venv.ensure(str(ROOT / "build" / "e2b-sdk"), str(ROOT / "template/e2b/sdk-requirements.txt"))
    except sdk_venv.VenvError as e:
        pytest.fail(str(e))
    d = folder(tmp_path)
    (d / "e2b.Dockerfile").write_text("FROM e2bdev/base:latest\nCOPY --chown=1000:1000 app.py /app/\nUSER 1000\n"
                                      "RUN id\nUSER 1000:1000\n")
    out = tmp_path / "sdk.json"
    cp = subprocess.run([sdk, "-m", "template.e2b.dockerfile", "--dir", str(d), "--out", str(out)],
                        capture_output=True, text=True, env=ENV, timeout=120)
    assert cp.returncode == 0, cp.stderr
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS, "--json", str(out)], capture_output=True,
                        text=True)
    assert cp.returncode == 0, cp.stderr
    steps = [[s["type"], *s["args"]] for s in json.loads(cp.stdout)["steps"]]
    assert ["COPY", "app.py", "/app/", "1000:1000", ""] in steps and ["USER", "1000"] in steps
    assert steps[-2:] == [["USER", "1000:1000"], ["WORKDIR", "/home/user"]]


@pytest.mark.parametrize("what,template,message", [
    ("a uid of 11 digits", {"fromTemplate": "base", "steps": [{"type": "USER", "args": ["10000000000"]}]},
     "step 0: USER takes [name] or [name, \"true\"]: a login name or a numeric uid"),
    ("a RUN as user:group", {"fromTemplate": "base", "steps": [{"type": "RUN", "args": ["id", "1000:1000"]}]},
     "step 0: RUN: user '1000:1000' is not a login name or a numeric uid"),
    ("a COPY owner with a sign", {"fromTemplate": "base", "steps": [
        {"type": "COPY", "args": ["app.py", "/app/", "-1", ""], "filesHash": "0" * 64}]},
     "step 0: COPY: owner '-1' is not USER or USER:GROUP of login names or numeric ids"),
], ids=["uid-11-digits", "run-user-group", "copy-owner-sign"])
def test_bad_users_are_still_refused(tmp_path, what, template, message):
    cp = read(folder(tmp_path), template)
    assert cp.returncode == 1 and message in cp.stderr, cp.stderr


def test_fromtemplate_names_our_flavors_and_only_the_built_ones(tmp_path):
    """fromTemplate naming a flavor of this checkout (e2b-rt, for which E2B
    has no name) builds on it; E2B's name for a flavor this checkout does
    not build is refused, naming the flavor and the profile it needs."""
    d = folder(tmp_path)
    cp = read(d, {"fromTemplate": "e2b-rt", "steps": [{"type": "RUN", "args": ["true"]}]})
    assert cp.returncode == 0 and json.loads(cp.stdout)["from"] == {"kind": "flavor", "name": "e2b-rt",
                                                                     "as": "e2b-rt"}, cp.stderr
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", "e2b-ci e2b-rt"], capture_output=True, text=True)
    assert cp.returncode == 0
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "base"}))
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", "e2b-ci e2b-rt"], capture_output=True, text=True)
    assert cp.returncode == 1 and "'base' is E2B's name for our flavor e2b-base, which this checkout does not " \
        "build (its flavors: e2b-ci e2b-rt); build it where os-image/mkosi.profiles/e2b-base exists" in cp.stderr


def test_the_json_without_hashes_names_tojson_false(tmp_path):
    """The JS SDK's Template.toJSON(t, false) writes COPY steps without a
    filesHash: the refusal says so."""
    d = folder(tmp_path)
    npm = sdk_helpers.npm_sdk()
    script = npm / "make_compat_json.mjs"
    script.write_text("import { Template } from 'e2b'\n"
                      f"const t = Template({{ fileContextPath: {json.dumps(str(d))} }}).fromTemplate('base')"
                      ".copy('app.py', '/app/')\nconsole.log(await Template.toJSON(t, false))\n")
    cp = subprocess.run(["node", str(script)], cwd=npm, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "filesHash" not in cp.stdout
    (d / "e2b.template.json").write_text(cp.stdout)
    cp = read(d)
    assert cp.returncode == 1 and "step 0: COPY: no filesHash of 64 lowercase hex digits (the JS SDK's " \
        "Template.toJSON(t, false) writes none)" in cp.stderr, cp.stderr


def test_file_ignore_patterns_are_named_when_the_hash_differs(tmp_path):
    """A COPY hashed by the SDK without the files fileIgnorePatterns left
    out: the hash differs here, and the refusal names that cause with the
    others (an older SDK, a changed folder), not just a changed folder."""
    d = folder(tmp_path)
    (d / "site").mkdir()
    (d / "site/index.html").write_text("<p>hi</p>\n")
    (d / "site/secret.env").write_text("K=V\n")
    t = py_json(d, ".from_template('base')", "t = t.copy('site', '/srv/site')")
    (d / "e2b.template.json").write_text(json.dumps(t))
    assert read(d).returncode == 0
    script = d.parent / "make_py.py"
    script.write_text(script.read_text().replace("Template(file_context_path=",
                                                 "Template(file_ignore_patterns=['site/*.env'], file_context_path="))
    cp = subprocess.run([str(sdk_helpers.py_sdk()), str(script)], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["steps"][0]["filesHash"] != t["steps"][0]["filesHash"]
    (d / "e2b.template.json").write_text(cp.stdout)
    cp = read(d)
    assert cp.returncode == 0, cp.stderr
    (tmp_path / "normal.json").write_text(cp.stdout)
    st = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.stage", "--template", str(tmp_path / "normal.json"),
                         str(d), "--tree", str(tmp_path / "tree"), "--labels", str(tmp_path / "labels.json")],
                        capture_output=True, text=True, env=ENV)
    assert st.returncode == 1, st.stderr
    said = st.stderr
    assert "step 0: COPY site: its files do not hash to the step's filesHash. Likely causes:" in said, said
    assert "an older SDK" in said and "e2b for Python before 2.52" in said and "for JS before 2.30.2" in said
    assert "fileIgnorePatterns (Python: file_ignore_patterns)" in said and ".dockerignore" in said
    assert "has changed since" in said
    (d / ".dockerignore").write_text("e2b.template.json\nsite/*.env\n")  # what the message says to do
    assert subprocess.run(st.args, capture_output=True, text=True, env=ENV).returncode == 0


# Numeric users in the build (template/e2b/steps.py), against a fake image:
# mkosi-chroot's getent, id and USER's script answered from a passwd table.
PASSWD = ["root:x:0:0:root:/root:/bin/bash", "user:x:1000:1000::/home/user:/bin/bash",
          "app:x:1001:1001::/home/app:/bin/bash"]


@pytest.fixture
def image(monkeypatch):
    sys.path.insert(0, str(ROOT))
    from template.e2b import steps
    calls = []

    def chroot(*argv, check=True, capture=True):
        calls.append(argv)
        if argv[:2] == ("getent", "passwd"):
            line = next((p for p in PASSWD if argv[2] in (p.split(":")[0], p.split(":")[2])), "")
            return subprocess.CompletedProcess(argv, 0 if line else 2, line and line + "\n", "")
        if argv[:2] == ("id", "-gn"):
            return subprocess.CompletedProcess(argv, 0, argv[2] + "\n", "")
        assert argv[:2] == ("sh", "-c") and argv[3] == "user", argv  # USER's script: useradd when missing, sudo
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(steps, "chroot", chroot)
    return steps, calls


@pytest.mark.parametrize("spec,name", [("1000", "user"), ("1000:1000", "user"), ("1000:user", "user"),
                                       ("app:1001", "app"), ("app", "app"), ("0", "root")])
def test_a_numeric_user_is_the_account_that_has_the_uid(image, spec, name):
    """USER 1000 is uid 1000's account, as E2B's `id -u 1000` finds it; the
    context (envd's default user, the labels, the later steps) keeps its
    name, since envd looks users up by name only; with sudo, that name."""
    steps, calls = image
    ctx = {"user": "user", "workdir": None, "env": {}}
    steps.user_step(ctx, {"args": [spec, "true"]})
    assert ctx["user"] == name
    assert [c[4:] for c in calls if c[0] == "sh"] == [(name, "true")]
    assert steps.account("1001")["name"] == "app"


@pytest.mark.parametrize("spec,message", [
    ("1234", "no account has uid 1234 in the image; make one in a RUN step before it (useradd --create-home "
             "--uid 1234 NAME, as root) or name the user"),
    ("1000:50", "USER 1000:50: group 50 is not user's own group (user, gid 1000); envd runs the sandbox's "
                "commands with the account's own group, so drop ':50'"),
    ("app:staff", "group staff is not app's own group"),
])
def test_a_user_the_image_cannot_give_is_refused(image, spec, message):
    steps, _ = image
    with pytest.raises(steps.StepError) as e:
        steps.user_step({"user": "user", "workdir": None, "env": {}}, {"args": [spec]})
    assert message in str(e.value)


# e2b.toml beside e2b.template.json (template/e2b/e2btoml.py, run by
# template.sh after build/e2b-template): as beside an e2b.Dockerfile.
def toml_json(tmp_path: pathlib.Path, toml: str, template: dict | None = None) -> tuple:
    """(e2btoml.py's result, the normal form after it, its meta) for a JSON folder with this e2b.toml."""
    d = folder(tmp_path, "with-toml")
    (d / "e2b.toml").write_text(toml)
    cp = read(d, template or {"fromTemplate": "base", "steps": [{"type": "RUN", "args": ["true"]}]})
    assert cp.returncode == 0, cp.stderr
    normal, meta = tmp_path / "normal.json", tmp_path / "meta.json"
    normal.write_text(cp.stdout)
    cp = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.e2btoml", "--dir", str(d), "--normal", str(normal),
                         "--meta", str(meta)], capture_output=True, text=True, env=ENV)
    cp.dir = d
    return cp, json.loads(normal.read_text()), meta


# What E2B's CLI wrote (`e2b template build` before the Template SDK), numbers as TOML allows them.
CLI_TOML = ('# This is a config for E2B sandbox template.\ntemplate_id = "rki5dems9wqfm4r03t7g"\n'
            'dockerfile = "e2b.Dockerfile"\ntemplate_name = "my-agent"\nteam_id = "460355b3"\n'
            'cpu_count = 4\nmemory_mb = 4_096\n')


def test_e2b_toml_beside_the_json_reaches_the_labels(tmp_path):
    """cpu_count and memory_mb become the labels vcpu and memory-mb, as beside
    an e2b.Dockerfile (and as template.conf's vcpu, memory_mb); the keys that
    name the template in E2B's cloud, and dockerfile, are read and not used."""
    cp, normal, meta = toml_json(tmp_path, CLI_TOML)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(meta.read_text()) == {"cpu_count": 4, "memory_mb": 4096}
    assert normal["start_cmd"] is None and normal["ready_cmd"] is None
    labels = stage(cp.dir, json.dumps(normal), tmp_path, meta)
    assert (labels["vcpu"], labels["memory_mb"]) == (4, 4096)
    # Without the file, the flavor's defaults (os-image/flavors.json), as before.
    assert (stage(cp.dir, json.dumps(normal), tmp_path)["vcpu"], labels["ready"]) == (None, None)


@pytest.mark.parametrize("toml,json_cmds,start,ready", [
    # As `e2b template migrate` puts them into the template: start_cmd, with E2B's 20 s without a ready_cmd.
    ('start_cmd = "npm start"\n', {}, "npm start", "sleep 20"),
    ('start_cmd = "npm start"\nready_cmd = "curl -fs localhost:3000"\n', {}, "npm start", "curl -fs localhost:3000"),
    # The JSON's own pair stays; e2b.toml's is the same, or fills in the one the JSON lacks.
    ('start_cmd = "npm start"\n', {"startCmd": "npm start", "readyCmd": "test -f /up"}, "npm start", "test -f /up"),
    ('ready_cmd = "test -f /up"\n', {"startCmd": "node app.js"}, "node app.js", "test -f /up"),
    ("", {"startCmd": "node app.js"}, "node app.js", "sleep 20"),
])
def test_e2b_toml_start_and_ready_beside_the_json(tmp_path, toml, json_cmds, start, ready):
    cp, normal, meta = toml_json(tmp_path, toml, {"fromTemplate": "base", "steps": [], **json_cmds})
    assert cp.returncode == 0, cp.stderr
    assert (normal["start_cmd"], normal["ready_cmd"] or "sleep 20") == (start, ready)
    labels = stage(cp.dir, json.dumps(normal), tmp_path, meta)
    assert labels["ready"] == "command /usr/lib/e2b-template/ready"
    launch = json.loads((tmp_path / "tree/usr/lib/e2b-template-build/steps.json").read_text())["templates"][0]
    assert launch["start"] == {"start_cmd": start, "ready_cmd": ready}


@pytest.mark.parametrize("toml,message", [
    ('start_cmd = "npm start"\n', "e2b.toml: key 'start_cmd' ('npm start') differs from {d}/e2b.template.json's "
                                  "startCmd ('node app.js'); the JSON is what is built: remove start_cmd from "
                                  "e2b.toml, or put it into the template"),
    ('ready_cmd = "true"\n', "e2b.toml: key 'ready_cmd' ('true') differs from {d}/e2b.template.json's readyCmd"),
    ('start_cmd = "a\\u001bb"\n', "e2b.toml: key 'start_cmd' is larger than 256 KiB or has a control character"),
    ("cpu_count = 0\n", "e2b.toml: key 'cpu_count' = 0: must be a whole number from 1 to 64"),
    ("memory_mb = 1023\n", "e2b.toml: key 'memory_mb' = 1023: must be even"),
    ('memory_mb = "1024"\n', "e2b.toml: key 'memory_mb' must be an integer, not str \"1024\""),
    ('colour = "blue"\n', "e2b.toml: key 'colour' is not one of e2b.toml's ("),
    ('template_id = "x\n', "e2b.toml: not valid TOML ("),
])
def test_a_bad_e2b_toml_beside_the_json_is_refused(tmp_path, toml, message):
    cp, _, meta = toml_json(tmp_path, toml, {"fromTemplate": "base", "startCmd": "node app.js",
                                             "readyCmd": "test -f /up"})
    assert cp.returncode == 1 and f"template: {cp.dir}/{message.format(d=cp.dir)}" in cp.stderr, cp.stderr
    assert not meta.exists()


def test_a_symlinked_e2b_toml_is_refused_unread(tmp_path):
    outside = tmp_path / "outside.toml"
    outside.write_text('colour = "SECRET-OF-THE-HOST"\n')
    d = folder(tmp_path, "linked")
    (d / "e2b.toml").symlink_to(outside)
    assert read(d, {"fromTemplate": "base"}).returncode == 0
    cp = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.e2btoml", "--dir", str(d), "--normal",
                         str(d / "e2b.template.json"), "--meta", str(tmp_path / "meta.json")],
                        capture_output=True, text=True, env=ENV)
    assert cp.returncode == 1 and f"{d}/e2b.toml is a symlink; it must be a regular file" in cp.stderr, cp.stderr
    assert "SECRET" not in cp.stderr


def test_make_reads_e2b_toml_beside_the_json(tmp_path):
    """Through `make template=DIR` (template.sh): a bad e2b.toml beside a good
    e2b.template.json stops the build before mkosi, naming the file and the
    key, with nothing in out/; so does one beside template.conf, which would
    not be read."""
    d = folder(tmp_path, "json-toml")
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "base", "steps": []}))
    (d / "e2b.toml").write_text("cpu_count = 65\n")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}", f"out={out}"],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode != 0 and f"template: {d}/e2b.toml: key 'cpu_count' = 65: must be a whole number from 1 " \
        "to 64" in cp.stderr, cp.stderr[-3000:]
    assert not (out / "json-toml").exists() and "mkosi" not in cp.stderr
    c = folder(tmp_path, "conf-toml")
    (c / "template.conf").write_text("name = conf-toml\nbase = e2b-rt\n")
    (c / "e2b.toml").write_text("cpu_count = 4\n")
    cp = read(c)
    assert cp.returncode == 1 and f"{c}: both template.conf and e2b.toml: template.conf is read and e2b.toml " \
        "would not be; set vcpu and memory_mb in template.conf" in cp.stderr, cp.stderr
