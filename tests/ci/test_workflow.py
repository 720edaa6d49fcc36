"""Lint ci/image.yml: it parses, has the matrix and steps the issue asks for,
keeps secrets out of the repo, and every `make` it runs names a real target."""
import pathlib
import re
import shlex
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / "ci" / "image.yml"


@pytest.fixture(scope="module")
def wf():
    return yaml.safe_load(WORKFLOW.read_text())


def make_targets() -> set:
    """Every target make knows, from its database (`make -pRrq`; nothing runs)."""
    cp = subprocess.run(["make", "-pRrq", "-f", "Makefile", ":"], cwd=ROOT, capture_output=True,
                        text=True, timeout=120)
    targets = set()
    for line in cp.stdout.splitlines():
        m = re.match(r"^([A-Za-z0-9_.%/-]+):(?!=)", line)
        if m and not line.startswith(("#", "\t")):
            targets.add(m.group(1))
    return targets


def steps(wf):
    for job in wf["jobs"].values():
        yield from job["steps"]


def make_invocations(wf):
    """(target, variables) for each `make` in each run: step; variables are
    name=value words, other words are targets (none means the default goal)."""
    for step in steps(wf):
        for line in step.get("run", "").splitlines():
            line = re.sub(r"\$\{\{[^}]*\}\}", "GHA-EXPR", line)  # ${{ ... }} is one word
            for cmd in re.split(r"&&|;|\|\|", line):
                words = shlex.split(cmd.strip()) if cmd.strip() else []
                if words[:1] != ["make"]:
                    continue
                # A shell expansion (${pydeps:+pydeps=$pydeps}) is the runner's: empty or a variable.
                words = [w for w in words if not w.startswith("$")]
                goals = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
                yield goals or ["<default>"], [w for w in words[1:] if "=" in w]


def test_parses_with_triggers_and_jobs(wf):
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on` as true
    assert triggers and "push" in triggers and "pull_request" in triggers
    assert wf["jobs"]


def test_matrix_over_flavors_amd64_debian(wf):
    (job,) = wf["jobs"].values()
    matrix = job["strategy"]["matrix"]
    assert sorted(matrix["flavor"]) == ["e2b-base", "e2b-ci", "e2b-rt"]
    assert matrix["arch"] == ["amd64"]
    assert job["container"]["image"].startswith("debian:")


def test_steps_in_order(wf):
    runs = [g[0] for g, _ in make_invocations(wf)]
    # The first run of each target, in order (repro runs again later, for builder mode).
    firsts = [r for i, r in enumerate(runs) if r not in runs[:i]]
    assert firsts == ["deps", "repro", "<default>", "boot-test", "publish", "templates"]
    uploads = [s for s in steps(wf) if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and "manifest.json" in uploads[0]["with"]["path"]


def test_every_make_target_exists(wf):
    known = make_targets()
    for goals, _ in make_invocations(wf):
        for g in goals:
            if g != "<default>":
                assert g in known, f"ci/image.yml runs `make {g}`, which the Makefile does not define"
    # The dry run of each invocation must also resolve (variables expanded).
    for goals, vars_ in make_invocations(wf):
        if goals == ["<default>"] or goals[0] in ("deps",):
            continue
        cp = subprocess.run(["make", "-n", *goals, *vars_], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
        assert "No rule to make target" not in cp.stderr, cp.stderr


def test_credentials_only_from_secrets(wf):
    text = WORKFLOW.read_text()
    push = [s for s in steps(wf) if "make publish" in s.get("run", "")]
    assert push
    env = push[0].get("env", {})
    assert env and all(re.fullmatch(r"\$\{\{\s*secrets\.[A-Z_]+\s*\}\}", v) for v in env.values()), env
    # Nothing that looks like a literal credential or a TLS opt-out.
    assert not re.search(r"(?i)(password|token|creds)\s*[:=]\s*['\"]?[A-Za-z0-9+/]{8,}", text.replace("secrets.", ""))
    assert "tls-verify=false" not in text and "--insecure" not in text


def test_detect_missing_target(tmp_path):
    """The target check itself catches a workflow that names an unknown target."""
    bad = {"jobs": {"j": {"steps": [{"run": "make flavor=e2b-rt no-such-target"}]}}}
    known = make_targets()
    goals = [g for gs, _ in make_invocations(bad) for g in gs]
    assert goals == ["no-such-target"] and "no-such-target" not in known
    assert {"boot-test", "publish", "templates", "repro", "deps"} <= known


def test_the_matrix_shares_one_cache_read_only_for_pull_requests(wf):
    """Issue 52: every job takes the shared cache's registry from the
    repository's variable, a pull request's jobs only read it, step layers
    are scoped by a tenant, and its credentials come from secrets."""
    env = wf["jobs"]["image"]["env"]
    assert env["cache_registry"] == "${{ vars.CACHE_REGISTRY }}"
    assert env["cache_registry_push"] == "${{ github.event_name == 'pull_request' && '0' || '1' }}"
    assert env["tenant"]
    login = [s for s in steps(wf) if "skopeo login" in s.get("run", "")]
    assert len(login) == 1 and all(re.fullmatch(r"\$\{\{\s*secrets\.[A-Z_]+\s*\}\}", v)
                                   for v in login[0]["env"].values()), login
    assert "--password-stdin" in login[0]["run"]
    names = [s.get("name") for s in steps(wf)]
    assert names.index("Shared cache credentials") < names.index("Reproducibility (two builds, identical digests)")
