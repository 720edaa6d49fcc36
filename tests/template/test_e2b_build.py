"""Real builds (`make template=DIR`, mkosi, packing) of E2B Template JSON
written by E2B's own Python SDK: examples/templates/e2b-sdk (fromTemplate
base, so on e2b-base, as on E2B), whose steps run in order with E2B's meaning
(RUN with the network through the build's own apt sources, USER making its
account, WORKDIR, COPY with owner and mode, ENV), and whose start and ready
commands run as the steps left the context. Then what only a build finds:
a RUN that fails, a RUN that unguards, and a RUN that reaches for the build
host (issue 37's rules, in this format too), in templates on e2b-rt (warm,
as the web example's), which an E2B template names by its flavor name."""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sdk"))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "builder"))
import bases  # noqa: E402
import e2b_example  # noqa: E402
import testimages  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

ROOT = testimages.ROOT
sdk_json = e2b_example.sdk_json


@pytest.fixture(scope="module")
def example():
    return e2b_example.built_or_fail()


def test_the_steps_ran_with_e2bs_meaning(example):
    t = example.tree
    app = next(line.split(":") for line in (t / "etc/passwd").read_text().splitlines() if line.startswith("app:"))
    uid = int(app[2])
    assert app[5] == "/home/app" and app[6] == "/bin/bash"  # USER made it: useradd --create-home
    assert (t / "usr/bin/python3").exists()  # RUN apt-get, with the network
    st = (t / "opt/app/server.py").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (uid, uid, 0o755)  # COPY's owner and mode
    assert (t / "opt/app").stat().st_uid == uid  # WORKDIR made it as the user's
    assert (t / "opt/app/static/index.html").stat().st_uid == uid  # a directory, relative to the workdir
    # RUN: as the context's user, in its workdir.
    assert (t / "opt/app/build-info.txt").read_text() == "built by app in /opt/app\n"
    # The build's own apt sources, not mkosi's, while the steps ran and after.
    assert sorted(p.name for p in (t / "etc/apt/sources.list.d").iterdir()) == ["e2b.sources"]
    assert not (t / "usr/lib/e2b-template-build").exists()


def test_start_and_ready_run_as_the_steps_left_them(example):
    t = example.tree
    for name, cmd in (("start", "python3 server.py 3000"), ("ready", "ss -Htuln sport = :3000")):
        text = (t / "usr/lib/e2b-template" / name).read_text()
        assert "env -i -C /opt/app" in text and "--reuid=app" in text and "/bin/bash -l -c" in text, text
        assert "'GREETING=hello from an E2B template'" in text and cmd in text, text
    unit = (t / "usr/lib/systemd/system/e2b-template.service").read_text()
    assert "ExecStart=/usr/lib/e2b-template/start" in unit and "Restart=no" in unit and "After=envd.service" in unit
    assert (t / "etc/systemd/system/multi-user.target.wants/e2b-template.service").is_symlink()
    labels = testimages.check_labels(example, "e2b-sdk", "e2b-base", "10000,10052,10053,49983")
    assert labels["org.e2b-images.ready"] == "command /usr/lib/e2b-template/ready"
    assert labels["org.e2b-images.ready-timeout"] == "600"
    # envd's defaults, as E2B's build sets them at /init: the last USER and WORKDIR.
    assert labels["org.e2b-images.envd-user"] == "app" and labels["org.e2b-images.envd-workdir"] == "/opt/app"
    # The ENV reaches the start and ready commands only, as on E2B: not every login shell.
    assert "GREETING" not in "".join(p.read_text() for p in (t / "etc/profile.d").glob("*.sh") if not p.is_symlink())


def test_the_ready_command_runs_the_way_the_warmup_runs_it(example):
    """The ready launcher, run in the image root as root (the warmup's
    user), drops to the template's user and workdir: a command of ours in
    place of the SDK's shows who and where it runs."""
    t = example.tree
    text = (t / "usr/lib/e2b-template/ready").read_text()
    probe = text.replace("[ -n \"$(ss -Htuln sport = :3000)\" ]", "echo \"$(id -un) $(pwd) $GREETING\"")
    assert probe != text
    cp = subprocess.run(["chroot", str(t), "/bin/sh", "-c", probe.split("\n", 3)[3]], capture_output=True,
                        text=True, timeout=60)
    assert cp.stdout.strip().endswith("app /opt/app hello from an E2B template"), (cp.stdout, cp.stderr)


def one_step_template(tmp_path: pathlib.Path, steps: list) -> pathlib.Path:
    d = tmp_path / "bad-e2b"
    d.mkdir()
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-rt", "steps": [
        {"type": "RUN", "args": [cmd, "root"], "force": False} for cmd in steps]}))
    return d


def failed_build(tmp_path, steps, example):
    out = tmp_path / "out"
    cp = testimages.build_template(one_step_template(tmp_path, steps), "e2b-rt", out)
    assert cp.returncode != 0
    assert not (out / "bad-e2b").exists(), "a failed build left out/bad-e2b/"
    return cp.stderr


def test_a_failing_run_names_its_index_command_and_last_lines(tmp_path, example):
    err = failed_build(tmp_path, ["echo first", "echo about to fail; ls /no/such/dir"], example)
    assert "template: step 1 (RUN) failed: `echo about to fail; ls /no/such/dir` as root in /root " \
           "failed with exit status 2" in err, err[-3000:]
    assert "template:   about to fail" in err


def test_a_run_cannot_unguard(tmp_path, example):
    err = failed_build(tmp_path, ["sed -i 's/49983,//' /etc/e2b/guarded-ports",
                                  "echo 'disable envd-guard.service' > /usr/lib/systemd/system-preset/00-x.preset"],
                       example)
    assert "template:   guard: /etc/e2b/guarded-ports changed" in err, err[-3000:]
    assert "template:   presets: /usr/lib/systemd/system-preset/00-x.preset added" in err, err[-3000:]


def test_a_run_cannot_reach_the_build_host(tmp_path, example):
    """Issue 37's escape, from a RUN step (which has the network, and runs
    as root): the host's files through /proc/PID/root and the checkout
    through /work/src stay as they were. The first step leaves a process
    behind, holding its output: the next steps still run, and the build
    ends."""
    host = pathlib.Path(tempfile.mkdtemp(prefix="e2b-test-canary-", dir="/var/tmp"))
    try:
        (host / "precious").write_text("the build host's\n")
        before = (bases.tree_state(host), bases.checkout_owners())
        log = "/usr/lib/e2b-escape.log"
        steps = ["(sleep 600; echo late) & echo left a process behind",  # a step ends when its command does
                 f"for r in /proc/[0-9]*/root; do echo pwned > $r{host}/precious 2>/dev/null && "
                 f"echo \"wrote $r\" >> {log}; done; echo \"processes: $(ls -d /proc/[0-9]* | wc -l)\" >> {log}",
                 "chown 1000 /work/src 2>/dev/null; echo pwned > /work/src/Makefile 2>/dev/null; true"]
        out = tmp_path / "out"
        cp = testimages.build_template(one_step_template(tmp_path, steps), "e2b-rt", out)
        assert cp.returncode == 0, cp.stderr[-4000:]
        escaped = (out / "bad-e2b/work/mkosi-out/image" / log.lstrip("/")).read_text()
        assert "wrote" not in escaped and int(escaped.split("processes: ")[1]) < 30, escaped
        assert (bases.tree_state(host), bases.checkout_owners()) == before
        assert "pwned" not in (ROOT / "Makefile").read_text()
    finally:
        shutil.rmtree(host, ignore_errors=True)


def write_e2b(folder: pathlib.Path, template: dict) -> pathlib.Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "e2b.template.json").write_text(json.dumps(template))
    return folder


def build_in(template: pathlib.Path, out: pathlib.Path, path: pathlib.Path | None = None):
    """`make template=` on e2b-rt, with template_path=PATH when given."""
    return testimages.make("e2b-rt", out, "image", f"template={template}",
                           *([f"template_path={path}"] if path else []))


def test_a_template_on_another_local_template(tmp_path, example):
    """fromTemplate naming a folder in template_path=: the base's steps, then
    its own, with the base's workdir and ENVs carried on and USER back at
    `user` (E2B's default USER phase runs again); its base's start and
    ready commands, in the base's context, since it sets none of its own."""
    write_e2b(tmp_path / "chain-base", {"fromTemplate": "e2b-rt", "steps": [
        {"type": "ENV", "args": ["FROM_BASE", "set in the base"]},
        {"type": "USER", "args": ["root"]},
        {"type": "WORKDIR", "args": ["/srv/base"]},
        {"type": "RUN", "args": ["echo base > base-ran"]}],
        "startCmd": "sleep infinity", "readyCmd": "test -f /srv/base/base-ran"})
    child = write_e2b(tmp_path / "chain-child", {"fromTemplate": "chain-base", "steps": [
        {"type": "RUN", "args": ["echo \"$FROM_BASE|$(pwd)|$(id -un)\" > /tmp/child-saw; cp /tmp/child-saw .", "root"]},
        {"type": "RUN", "args": ["id -un > ~/child-user"]}]})
    out = tmp_path / "out"
    cp = build_in(child, out, tmp_path)
    assert cp.returncode == 0, cp.stderr[-4000:]
    t = out / "chain-child/work/mkosi-out/image"
    assert (t / "srv/base/base-ran").read_text() == "base\n"
    assert (t / "srv/base/child-saw").read_text() == "set in the base|/srv/base|root\n"
    assert (t / "home/user/child-user").read_text() == "user\n"
    start = (t / "usr/lib/e2b-template/start").read_text()
    assert "--reuid=root" in start and "-C /srv/base" in start and "sleep infinity" in start, start
    assert "test -f /srv/base/base-ran" in (t / "usr/lib/e2b-template/ready").read_text()
    assert "template chain-base: step 3 RUN" in cp.stderr and "template chain-child: step 0 RUN" in cp.stderr


def test_a_fromtemplate_cycle_and_a_missing_base_are_refused(tmp_path):
    write_e2b(tmp_path / "loop-a", {"fromTemplate": "loop-b", "steps": []})
    write_e2b(tmp_path / "loop-b", {"fromTemplate": "loop-a", "steps": []})
    write_e2b(tmp_path / "orphan", {"fromTemplate": "no-such-template", "steps": []})
    conf = tmp_path / "conf-base"
    conf.mkdir()
    (conf / "template.conf").write_text("name = conf-base\nbase = e2b-rt\n")
    write_e2b(tmp_path / "on-conf", {"fromTemplate": "conf-base", "steps": []})
    for name, message in (("loop-a", "fromTemplate cycle: loop-a loop-b loop-a"),
                          ("orphan", "fromTemplate 'no-such-template': no template folder"),
                          ("on-conf", "is a template.conf template; an E2B template builds on E2B templates")):
        out = tmp_path / f"out-{name}"
        cp = build_in(tmp_path / name, out, tmp_path)
        assert cp.returncode != 0 and message in cp.stderr, (name, cp.stderr[-2000:])
        assert not (out / name).exists()


def test_fromtemplate_finds_no_sibling_without_template_path(tmp_path):
    """Issue 49, finding 8: where tenants' folders sit side by side,
    fromTemplate naming a sibling staged the victim's files into the
    attacker's image. A local template is looked up only in the folders
    template_path= names: without it the sibling is refused, naming the
    knob; a template_path= without it does not find it either; nothing is
    built."""
    victim = write_e2b(tmp_path / "tenants/victim", {"fromTemplate": "base", "steps": []})
    (victim / "secret.txt").write_text("the victim's\n")
    attacker = write_e2b(tmp_path / "tenants/attacker", {"fromTemplate": "victim", "steps": []})
    elsewhere = tmp_path / "shared-templates"
    elsewhere.mkdir()
    for path, message in ((None, "fromTemplate 'victim': a local template is looked up only in the folders "
                                 "template_path= names, and none is given: pass template_path=DIR"),
                          (elsewhere, f"fromTemplate 'victim': no template folder victim/ in template_path={elsewhere}")):
        out = tmp_path / "out"
        cp = build_in(attacker, out, path)
        assert cp.returncode != 0 and message in cp.stderr, cp.stderr[-2000:]
        assert not (out / "attacker").exists() and "mkosi" not in cp.stderr
