"""E2B's older template format (e2b.Dockerfile with e2b.toml) and a plain
Dockerfile: converted by E2B's own Python SDK (template/e2b/dockerfile.py in
the $(build)/e2b-sdk venv, template/e2b/sdk-requirements.txt) into the Template
JSON build/e2b-template reads with --json. The conversions are checked
against what E2B's semantics demand (Docker's defaults for the steps, E2B's
for what follows them, E2B's CLI for e2b.toml), every refusal names the file
and what to do, and nothing of a file outside the folder reaches the output
or the messages. One real build (`make template=DIR`, mkosi, on e2b-base):
examples/templates/e2b-dockerfile."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import testimages  # noqa: E402
from template.e2b import sdk_venv  # noqa: E402

ROOT = testimages.ROOT
TOOL = ROOT / "build" / "e2b-template"
FLAVORS = "e2b-base e2b-ci e2b-rt"
EXAMPLE = testimages.EXAMPLES / "e2b-dockerfile"
SECRET = "SECRET-OUTSIDE-THE-FOLDER"


@pytest.fixture(scope="session")
def sdk() -> str:
    """The build's own venv, as template.sh makes it."""
    try:
        return sdk_venv.ensure(str(ROOT / "build" / "e2b-sdk"), str(ROOT / "template" / "e2b" / "sdk-requirements.txt"))
    except sdk_venv.VenvError as e:
        pytest.fail(str(e))


@pytest.fixture
def outside(tmp_path) -> pathlib.Path:
    """A file of the build machine, beside the template's folder."""
    p = tmp_path / "secret.txt"
    p.write_text(f"FROM e2bdev/base\nRUN echo {SECRET}\n")
    return p


def folder(tmp_path: pathlib.Path, files: dict, name: str = "tpl") -> pathlib.Path:
    d = tmp_path / name
    d.mkdir()
    for rel, text in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    return d


def convert(sdk: str, d: pathlib.Path) -> subprocess.CompletedProcess:
    out, meta = d.parent / f"{d.name}.sdk.json", d.parent / f"{d.name}.meta.json"
    out.unlink(missing_ok=True)
    cp = subprocess.run([sdk, "-m", "template.e2b.dockerfile", "--dir", str(d), "--out", str(out), "--meta", str(meta)],
                        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    cp.json = json.loads(out.read_text()) if cp.returncode == 0 else None
    cp.meta = json.loads(meta.read_text()) if cp.returncode == 0 else None
    cp.out = out
    if cp.returncode != 0:
        assert not out.exists()
    return cp


def converted(sdk: str, d: pathlib.Path) -> subprocess.CompletedProcess:
    cp = convert(sdk, d)
    assert cp.returncode == 0, cp.stderr
    return cp


def steps(t: dict) -> list:
    return [[s["type"], *s["args"]] for s in t["steps"]]


def normal(d: pathlib.Path, json_file: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS, "--json", str(json_file)],
                          capture_output=True, text=True)


def test_every_instruction_with_docker_and_e2b_meaning(sdk, tmp_path):
    """Docker's defaults first (root, /), ARG and ENV as E2B's ENV, RUN's
    exec form as one shell command, COPY's --chown and --chmod as its owner
    and mode, ENTRYPOINT (exec form) with CMD appended as the start command,
    E2B's 20 s wait as its ready command; an explicit USER and WORKDIR stay
    last (no E2B default after them)."""
    d = folder(tmp_path, {"e2b.Dockerfile": "\n".join([
        "FROM e2bdev/base",
        "ARG VERSION=1.2",
        'ENV A=x B="two words"',
        "RUN echo hi && apt-get install -y jq",
        'RUN ["echo", "exec form", "$A"]',
        "WORKDIR /srv",
        "COPY --chown=app:staff --chmod=0640 conf.txt /etc/app/conf.txt",
        "COPY data/ data/",
        "EXPOSE 8000",
        "USER app",
        'ENTRYPOINT ["python3", "-m", "http.server"]',
        'CMD ["8000"]', ""]), "conf.txt": "k=v\n", "data/a.txt": "a\n"})
    cp = converted(sdk, d)
    t = cp.json
    assert steps(t) == [
        ["USER", "root"], ["WORKDIR", "/"],
        ["ENV", "VERSION", "1.2"], ["ENV", "A", "x", "B", "two words"],
        ["RUN", "echo hi && apt-get install -y jq"], ["RUN", "echo 'exec form' '$A'"],
        ["WORKDIR", "/srv"],
        ["COPY", "conf.txt", "/etc/app/conf.txt", "app:staff", "0640"],
        ["COPY", "data/", "data/", "", ""],
        ["USER", "app"]]
    assert t["fromTemplate"] == "base" and "fromImage" not in t
    assert t["startCmd"] == "python3 -m http.server 8000" and t["readyCmd"] == "sleep 20"
    assert cp.meta == {"dockerfile": "e2b.Dockerfile", "cpu_count": None, "memory_mb": None}
    # The reader takes it as it is; the stager's filesHash check agrees with the SDK's.
    n = normal(d, cp.out)
    assert n.returncode == 0, n.stderr
    form = json.loads(n.stdout)
    assert form["name"] == "tpl" and form["from"] == {"kind": "flavor", "name": "e2b-base", "as": "base"}
    assert [s["type"] for s in form["steps"]] == [s["type"] for s in t["steps"]]
    (tmp_path / "normal.json").write_text(n.stdout)
    st = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.stage", "--template",
                         str(tmp_path / "normal.json"), str(d), "--tree", str(tmp_path / "tree"),
                         "--labels", str(tmp_path / "labels.json")], capture_output=True, text=True,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert st.returncode == 0, st.stderr
    assert json.loads((tmp_path / "labels.json").read_text())["ready"] == "command /usr/lib/e2b-template/ready"
    # EXPOSE means nothing in a template: skipped without a word; nothing else was skipped.
    assert cp.stderr == ""


def test_without_user_and_workdir_e2bs_defaults_come_last(sdk, tmp_path):
    """The steps run as root in / (Docker's defaults); the sandbox gets
    E2B's user and home after them. A shell-form CMD is the start command as
    written; an unsupported instruction is skipped with the parser's warning,
    naming the file."""
    d = folder(tmp_path, {"Dockerfile": "FROM python:3.12-slim\nRUN pip install flask\nSTOPSIGNAL SIGTERM\n"
                                        "CMD python3 app.py --port 5000\n"})
    cp = converted(sdk, d)
    assert steps(cp.json) == [["USER", "root"], ["WORKDIR", "/"], ["RUN", "pip install flask"],
                              ["USER", "user"], ["WORKDIR", "/home/user"]]
    assert cp.json["fromImage"] == "python:3.12-slim" and "fromTemplate" not in cp.json
    assert cp.json["startCmd"] == "python3 app.py --port 5000" and cp.json["readyCmd"] == "sleep 20"
    assert f"template: {d}/Dockerfile: Unsupported instruction: STOPSIGNAL" in cp.stderr
    n = normal(d, cp.out)
    assert n.returncode == 0 and json.loads(n.stdout)["from"] == {"kind": "image", "ref": "python:3.12-slim"}


E2B_IMAGES = [
    ("e2bdev/base", ("fromTemplate", "base")),
    ("e2bdev/base:latest", ("fromTemplate", "base")),
    ("docker.io/e2bdev/base:latest", ("fromTemplate", "base")),
    ("index.docker.io/e2bdev/base@sha256:" + "4" * 64, ("fromTemplate", "base")),
    ("registry-1.docker.io/e2bdev/base:v2@sha256:" + "4" * 64, ("fromTemplate", "base")),
    ("e2bdev/code-interpreter:latest", ("fromTemplate", "code-interpreter")),
    ("e2bdev/code-interpreter", ("fromTemplate", "code-interpreter")),
    ("e2bdev/code-interpreter@sha256:" + "4" * 64, ("fromTemplate", "code-interpreter")),
    ("docker.io/e2bdev/code-interpreter:1.0", ("fromTemplate", "code-interpreter")),
    ("e2bdev/base-extra:1", ("fromImage", "e2bdev/base-extra:1")),
    ("myorg/e2bdev/base", ("fromImage", "myorg/e2bdev/base")),
    ("docker.io/library/e2bdev/base", ("fromImage", "docker.io/library/e2bdev/base")),
    ("quay.io/e2bdev/base", ("fromImage", "quay.io/e2bdev/base")),
    ("ubuntu:22.04", ("fromImage", "ubuntu:22.04")),
]
FLAVOR_OF = {"base": "e2b-base", "code-interpreter": "e2b-ci"}


@pytest.mark.parametrize("image,expect", E2B_IMAGES)
def test_from_e2bs_own_images_is_our_flavor(sdk, tmp_path, image, expect):
    """FROM e2bdev/base (any tag or digest, Docker Hub's hosts too) is
    e2b-base, e2bdev/code-interpreter e2b-ci; and the Template JSON's
    fromImage of the same name is the same flavor: the two readers agree."""
    d = folder(tmp_path, {"e2b.Dockerfile": f"FROM {image}\nRUN true\n"})
    cp = converted(sdk, d)
    key, value = expect
    assert cp.json[key] == value and ({"fromTemplate", "fromImage"} - {key}).isdisjoint(cp.json)
    n = normal(d, cp.out)
    assert n.returncode == 0, n.stderr
    want = {"kind": "flavor", "name": FLAVOR_OF[value], "as": value} if key == "fromTemplate" \
        else {"kind": "image", "ref": value}
    assert json.loads(n.stdout)["from"] == want
    j = folder(tmp_path, {"e2b.template.json": json.dumps({"fromImage": image, "steps": []})}, "as-json")
    n = subprocess.run([str(TOOL), "--dir", str(j), "--flavors", FLAVORS], capture_output=True, text=True)
    assert n.returncode == 0 and json.loads(n.stdout)["from"] == want, n.stderr


@pytest.mark.parametrize("toml,start,ready", [
    # `e2b template migrate`: start_cmd replaces CMD; without ready_cmd, E2B's 20 s.
    ('start_cmd = "npm start"\nready_cmd = "curl -fs localhost:3000"\n', "npm start", "curl -fs localhost:3000"),
    ('start_cmd = "npm start"\n', "npm start", "sleep 20"),
    # ready_cmd alone keeps the Dockerfile's CMD as the start command.
    ('ready_cmd = "test -f /tmp/up"\n', "node server.js", "test -f /tmp/up"),
    ("", "node server.js", "sleep 20"),
])
def test_e2b_toml_start_and_ready_as_e2bs_cli(sdk, tmp_path, toml, start, ready):
    d = folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\nCMD node server.js\n",
                          "e2b.toml": 'template_id = "abc123"\nteam_id = "t"\ndockerfile = "e2b.Dockerfile"\n'
                                      'cpu_count = 4\nmemory_mb = 2_048\n' + toml})
    cp = converted(sdk, d)
    assert (cp.json["startCmd"], cp.json["readyCmd"]) == (start, ready)
    assert cp.meta == {"dockerfile": "e2b.Dockerfile", "cpu_count": 4, "memory_mb": 2048}


def test_which_file(sdk, tmp_path):
    """e2b.toml's dockerfile key (inside the folder) wins; without e2b.toml,
    e2b.Dockerfile before Dockerfile."""
    files = {"e2b.Dockerfile": "FROM e2bdev/base\nRUN echo e2b\n", "Dockerfile": "FROM e2bdev/base\nRUN echo plain\n",
             "docker/Custom.Dockerfile": "FROM e2bdev/base\nRUN echo custom\n"}
    d = folder(tmp_path, files, "both")
    assert ["RUN", "echo e2b"] in steps(converted(sdk, d).json)
    (d / "e2b.toml").write_text('dockerfile = "docker/Custom.Dockerfile"\n')
    cp = converted(sdk, d)
    assert ["RUN", "echo custom"] in steps(cp.json) and cp.meta["dockerfile"] == "docker/Custom.Dockerfile"
    (d / "e2b.toml").write_text('dockerfile = "Dockerfile"\n')
    assert ["RUN", "echo plain"] in steps(converted(sdk, d).json)
    d = folder(tmp_path, {"Dockerfile": files["Dockerfile"]}, "plain")
    assert ["RUN", "echo plain"] in steps(converted(sdk, d).json)


def test_e2b_template_finds_the_format(tmp_path, sdk):
    """build/e2b-template: template.conf and e2b.template.json first; a
    Dockerfile folder without --json is told how; none lists every file."""
    d = folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\n"})
    cp = subprocess.run([str(TOOL), "--dir", str(d), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 1 and f"{d}/e2b.Dockerfile: a Dockerfile template: template/e2b/dockerfile.py" in cp.stderr
    assert "--json FILE" in cp.stderr and f"make template={d}" in cp.stderr
    sdk_json = converted(sdk, d).out
    (d / "e2b.template.json").write_text(sdk_json.read_text())
    cp = normal(d, sdk_json)
    assert cp.returncode == 1 and f"{d}/e2b.template.json: --json FILE is for a Dockerfile template" in cp.stderr
    empty = folder(tmp_path, {"README": "x\n"}, "empty")
    cp = subprocess.run([str(TOOL), "--dir", str(empty), "--flavors", FLAVORS], capture_output=True, text=True)
    assert cp.returncode == 1 and f"template={empty}: no template.conf, e2b.template.json, e2b.toml, " \
        "e2b.Dockerfile or Dockerfile in it" in cp.stderr
    # The JSON's own faults name it and the folder it came from.
    (tmp_path / "bad.json").write_text('{"steps": []}')
    cp = normal(empty, tmp_path / "bad.json")
    assert cp.returncode == 1 and f"(the Template JSON of {empty}'s Dockerfile): key 'fromImage'" in cp.stderr


TOML_REFUSALS = [
    ('dockerfile = "e2b.Dockerfile\n', "e2b.toml: not valid TOML (", "fix it"),
    ('colour = "blue"\n', "e2b.toml: key 'colour' is not one of e2b.toml's (", "remove it"),
    ('cpu_count = "2"\n', "e2b.toml: key 'cpu_count' must be an integer, not str \"2\"", None),
    ("cpu_count = true\n", "e2b.toml: key 'cpu_count' must be an integer, not bool", None),
    ("memory_mb = 1024.0\n", "e2b.toml: key 'memory_mb' must be an integer, not float", None),
    ("start_cmd = 3\n", "e2b.toml: key 'start_cmd' must be a string, not int", None),
    ("cpu_count = 0\n", "e2b.toml: key 'cpu_count' = 0: must be a whole number from 1 to 64", None),
    ("memory_mb = -512\n", "e2b.toml: key 'memory_mb' = -512: must be a whole number from 128 to 65536", None),
    ("memory_mb = 1023\n", "e2b.toml: key 'memory_mb' = 1023: must be even", None),
    ('start_cmd = " "\n', "e2b.toml: key 'start_cmd' is empty; give a value or remove the key", None),
    ("[dockerfile]\nx = 1\n", "e2b.toml: key 'dockerfile' must be a string, not dict", None),
]


@pytest.mark.parametrize("toml,message,todo", TOML_REFUSALS, ids=[m.split(":")[1][:40] for _, m, _ in TOML_REFUSALS])
def test_a_bad_e2b_toml_is_refused(sdk, tmp_path, toml, message, todo):
    d = folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\n", "e2b.toml": toml})
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/{message}" in cp.stderr, cp.stderr
    assert todo is None or todo in cp.stderr


@pytest.mark.parametrize("dockerfile,make,message", [
    ("../secret.txt", None, "is outside the template's folder (absolute, or with '..'); name a file inside"),
    ("{outside}", None, "is outside the template's folder (absolute, or with '..')"),
    ("link/secret.txt", "dirlink", "leads out of the template's folder through a symlink"),
    ("e2b.Dockerfile", "filelink", "is a symlink; it must be a regular file in the template's folder"),
    ("sub", "dir", "is not a regular file; it must be one, in the template's folder"),
    ("fifo", "fifo", "is not a regular file; it must be one, in the template's folder"),
    ("missing.Dockerfile", None, "does not exist; write it, or name the file that holds the Dockerfile"),
])
def test_the_dockerfile_key_stays_in_the_folder(sdk, tmp_path, outside, dockerfile, make, message):
    d = folder(tmp_path, {})
    if make == "dirlink":
        (d / "link").symlink_to(outside.parent)
    elif make == "filelink":
        (d / "e2b.Dockerfile").symlink_to(outside)
    elif make == "dir":
        (d / "sub").mkdir()
    elif make == "fifo":
        os.mkfifo(d / "fifo")
    (d / "e2b.toml").write_text(f'dockerfile = "{dockerfile.format(outside=outside)}"\n')
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/e2b.toml: key 'dockerfile': " in cp.stderr, cp.stderr
    assert message in cp.stderr and SECRET not in cp.stderr + cp.stdout


def test_a_symlinked_dockerfile_without_e2b_toml(sdk, tmp_path, outside):
    d = folder(tmp_path, {})
    (d / "Dockerfile").symlink_to(outside)
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/Dockerfile: {d}/Dockerfile is a symlink" in cp.stderr
    assert SECRET not in cp.stderr + cp.stdout


def test_the_sdk_never_reads_a_path_for_the_text(sdk, tmp_path, outside):
    """The SDK takes its argument as a path when a file of that name exists:
    a Dockerfile whose text is a path of the build machine is parsed as text."""
    d = folder(tmp_path, {"Dockerfile": str(outside)})
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/Dockerfile: E2B's Dockerfile parser refuses it" in cp.stderr
    assert SECRET not in cp.stderr + cp.stdout


SDK_REFUSES = "E2B's Dockerfile parser refuses it: "


@pytest.mark.parametrize("copy,make,message", [
    # The SDK's own check; ours (below) would say the same.
    ("COPY ../secret.txt /x", None, SDK_REFUSES + 'Invalid source path "../secret.txt": path escapes the context'),
    ("COPY /etc/hostname /x", None, SDK_REFUSES + 'Invalid source path "/etc/hostname": absolute paths are not'),
    # What the SDK does not check: ours, before it hashes what the symlink reaches.
    ("COPY link/secret.txt /x", "dirlink", "COPY link/secret.txt /x: link/secret.txt is reached through a "
                                           "symlink that leads out of the template's folder"),
    ("COPY nothing-here /x", None, "COPY nothing-here /x: no file of the template's folder matches it"),
])
def test_copy_sources_stay_in_the_folder_before_the_sdk_hashes_them(sdk, tmp_path, outside, copy, make, message):
    d = folder(tmp_path, {"e2b.Dockerfile": f"FROM e2bdev/base\n{copy}\n"})
    if make == "dirlink":
        (d / "link").symlink_to(outside.parent)
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/e2b.Dockerfile: {message}" in cp.stderr, cp.stderr
    assert SECRET not in cp.stderr + cp.stdout


def test_a_symlinked_dockerignore_is_refused(sdk, tmp_path, outside):
    d = folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\nCOPY . /app\n", "a.txt": "a\n"})
    (d / ".dockerignore").symlink_to(outside)
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"{d}/.dockerignore: not a regular file of at most 1 MiB" in cp.stderr
    assert SECRET not in cp.stderr + cp.stdout


@pytest.mark.parametrize("dockerfile,message", [
    ("FROM e2bdev/base AS build\nRUN make\nFROM e2bdev/base\nCOPY --from=build /out /out\n",
     "Multi-stage Dockerfiles are not supported"),
    ("FROM e2bdev/base\nCOPY --from=builder /out /out\n", "COPY --from is not supported"),
    ("RUN echo no base\n", "Dockerfile must contain a FROM instruction"),
    ("FROM e2bdev/base\nCOPY --bogus=1 a b\n", "unknown flag: bogus"),
    ("FROM e2bdev/base\nCOPY --chmod=u+x a b\n", 'invalid chmod value "u+x"'),
    ("FROM e2bdev/base\nADD https://example.invalid/x.tgz /x\n", "ADD from a remote URL is not supported"),
    ("FROM e2bdev/base extra\n", "FROM requires either one or three arguments"),
    ("FROM e2bdev/base\nFOO bar\n", "unknown instruction: FOO"),
    ("\n  \n", "empty; a Dockerfile needs a FROM"),
])
def test_what_the_sdks_parser_refuses(sdk, tmp_path, dockerfile, message):
    d = folder(tmp_path, {"e2b.Dockerfile": dockerfile})
    cp = convert(sdk, d)
    assert cp.returncode == 1 and f"template: {d}/e2b.Dockerfile: " in cp.stderr and message in cp.stderr, cp.stderr
    assert "fix" in cp.stderr or "needs a FROM" in cp.stderr


@pytest.mark.parametrize("line,said", [("COPY --\x1b[31mred=1 a b", "unknown flag: \\x1b[31mred"),
                                       ("FOO\x07\x1b bar", "unknown instruction: FOO\\x07\\x1b")])
def test_the_parsers_words_are_escaped(sdk, tmp_path, line, said):
    d = folder(tmp_path, {"e2b.Dockerfile": f"FROM e2bdev/base\n{line}\n"})
    cp = convert(sdk, d)
    assert cp.returncode == 1 and said in cp.stderr, cp.stderr
    assert not any(c in cp.stderr for c in "\x1b\x07\r")


def test_a_bad_dockerfile_template_stops_make_with_nothing_in_out(tmp_path):
    """Through `make template=DIR`: refused before mkosi, no out/<name>/."""
    d = folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\nRUN true\n", "e2b.toml": "cpu_count = 0\n"},
               "bad-df")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}", f"out={out}"],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode != 0 and f"template: {d}/e2b.toml: key 'cpu_count' = 0: must be" in cp.stderr, cp.stderr
    assert not (out / "bad-df").exists() and "mkosi" not in cp.stderr


def test_e2b_template_json_wins_over_a_dockerfile_in_make(tmp_path):
    """template.sh reads e2b.template.json when there is one (its fault is
    the one named); the Dockerfile beside it is not converted."""
    d = folder(tmp_path, {"e2b.template.json": '{"steps": []}', "Dockerfile": "not a dockerfile\n",
                          "e2b.toml": "cpu_count = 0\n"}, "json-first")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={d}", f"out={out}"],
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode != 0 and f"{d}/e2b.template.json: key 'fromImage'" in cp.stderr, cp.stderr
    assert "e2b.toml" not in cp.stderr and "Dockerfile" not in cp.stderr
    assert not (out / "json-first").exists()


def test_a_dockerfile_template_as_a_base_is_read_the_same_way(tmp_path):
    """fromTemplate naming a Dockerfile folder of template_path=: read through
    E2B's SDK too (here its e2b.toml's fault stops the chain, named, before mkosi)."""
    folder(tmp_path, {"e2b.Dockerfile": "FROM e2bdev/base\nRUN true\n", "e2b.toml": "cpu_count = 0\n"}, "df-parent")
    child = folder(tmp_path, {"e2b.template.json": json.dumps(
        {"fromTemplate": "df-parent", "steps": [{"type": "RUN", "args": ["true"], "force": False}]})}, "child")
    out = tmp_path / "out"
    cp = subprocess.run(["make", "-C", str(ROOT), "--no-print-directory", "image", f"template={child}", f"out={out}",
                         f"template_path={tmp_path}"], capture_output=True, text=True, timeout=600)
    assert cp.returncode != 0 and f"template: {tmp_path}/df-parent/e2b.toml: key 'cpu_count' = 0" in cp.stderr, \
        cp.stderr
    assert f"template={child}: fromTemplate 'df-parent': its template is refused" in cp.stderr
    assert not (out / "child").exists()


# One real build of examples/templates/e2b-dockerfile (FROM e2bdev/base: on
# e2b-base, warm as the e2b-sdk example's): e2b.Dockerfile's steps,
# e2b.toml's start, ready, cpu_count and memory_mb.
@pytest.fixture(scope="module")
def example(tmp_path_factory):
    return testimages.copy_built(tmp_path_factory, EXAMPLE, base="e2b-base")


@pytest.mark.build
def test_the_dockerfile_steps_ran(example):
    t = example.tree
    app = next(line.split(":") for line in (t / "etc/passwd").read_text().splitlines() if line.startswith("app:"))
    uid, gid = int(app[2]), int(app[3])
    assert (t / "usr/bin/python3").exists()  # RUN apt-get, as root, with the network
    st = (t / "opt/app/serve.sh").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, gid, 0o755)  # --chown=app:app --chmod=0755
    st = (t / "opt/app/static/index.html").stat()
    assert (st.st_uid, st.st_gid) == (uid, gid)  # --chown=app: the group of the same name
    assert (t / "opt/app").stat().st_uid == uid
    # USER app, then RUN: as app, in the WORKDIR.
    assert (t / "opt/app/build-info.txt").read_text() == "built by app in /opt/app\n"


@pytest.mark.build
def test_start_ready_and_labels_from_e2b_toml(example):
    t = example.tree
    start = (t / "usr/lib/e2b-template/start").read_text()
    assert "/opt/app/serve.sh 3000" in start and "8080" not in start  # e2b.toml's start_cmd over CMD
    for name in ("start", "ready"):
        text = (t / "usr/lib/e2b-template" / name).read_text()
        assert "env -i -C /opt/app" in text and "--reuid=app" in text, text
        assert "'GREETING=hello from an e2b.Dockerfile'" in text, text
    assert "ss -Htuln sport = :3000 | grep -q ." in (t / "usr/lib/e2b-template/ready").read_text()
    unit = (t / "usr/lib/systemd/system/e2b-template.service").read_text()
    assert "ExecStart=/usr/lib/e2b-template/start" in unit and "Restart=no" in unit
    assert (t / "etc/systemd/system/multi-user.target.wants/e2b-template.service").is_symlink()
    labels = testimages.check_labels(example, "e2b-dockerfile", "e2b-base", "10000,10052,10053,49983")
    assert labels["org.e2b-images.vcpu"] == "2" and labels["org.e2b-images.memory-mb"] == "1024"
    assert labels["org.e2b-images.ready"] == "command /usr/lib/e2b-template/ready"
    assert labels["org.e2b-images.ready-timeout"] == "600"
