"""The shared cache's registry side (regcache/), against a real registry on
loopback (tests/registry.py: Debian's docker-registry, TLS from a CA made
for the test, htpasswd auth) and the real pinfetch: entries pushed and
pulled with their checks, a tampered blob and another entry's manifest
refused, a registry that refuses or is gone turned into a local fetch with
one line, a read-only runner, the step cache's keys per tenant, pruning.
No image is built here; tests/template/test_cache_registry.py builds."""
import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from harness import stop_process  # noqa: E402
from registry import tls_registry  # noqa: E402
from testimages import serve_directory  # noqa: E402

from regcache import entry  # noqa: E402
from regcache.registry import Miss, Refused, Registry, Unavailable  # noqa: E402

PY = "/usr/bin/python3"
REPO = "team/e2b-cache"


@pytest.fixture
def reg(tmp_path, monkeypatch):
    d = tmp_path / "registry"
    d.mkdir()
    with tls_registry(d, "runner", "runner-password") as r:
        monkeypatch.setenv("REGISTRY_AUTH_FILE", r["auth"])
        r["ref"] = f"{r['addr']}/{REPO}"
        yield r


def client(r) -> Registry:
    return Registry(r["ref"], r["certs"])


def env_for(r, ledger: pathlib.Path, **more) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), REGISTRY_AUTH_FILE=r["auth"], CERT_DIR=r["certs"],
               CACHE_REGISTRY=r["ref"], CACHE_LEDGER=str(ledger))
    env.update(more)
    return env


def blob_path(r, digest: str) -> pathlib.Path:
    hx = digest.split(":", 1)[1]
    return r["dir"] / "data/docker/registry/v2/blobs/sha256" / hx[:2] / hx / "data"


def two_files(d: pathlib.Path, tag: bytes) -> list:
    d.mkdir(parents=True, exist_ok=True)
    (d / "layer.tar").write_bytes(tag * 4096)
    (d / "meta.json").write_text(json.dumps({"made": tag.decode()}))
    return [("layer.tar", str(d / "layer.tar")), ("meta.json", str(d / "meta.json"))]


def test_an_entry_comes_back_as_pushed(reg, tmp_path):
    c = client(reg)
    entry.push(c, "step-" + "a" * 64, "step", "a" * 64, two_files(tmp_path / "a", b"A"), "t1")
    got = pathlib.Path(entry.pull(c, "step-" + "a" * 64, "step", "a" * 64, ["layer.tar", "meta.json"],
                                  str(tmp_path), 1 << 30))
    assert (got / "layer.tar").read_bytes() == b"A" * 4096
    assert json.loads((got / "meta.json").read_text()) == {"made": "A"}
    with pytest.raises(Miss):
        entry.pull(c, "step-" + "b" * 64, "step", "b" * 64, ["layer.tar", "meta.json"], str(tmp_path), 1 << 30)


def test_a_tampered_blob_is_refused(reg, tmp_path):
    """Another layer's bytes where the registry keeps step A's layer: the
    digest check refuses them, and nothing is left behind."""
    c = client(reg)
    entry.push(c, "step-" + "a" * 64, "step", "a" * 64, two_files(tmp_path / "a", b"A"), "t1")
    entry.push(c, "step-" + "b" * 64, "step", "b" * 64, two_files(tmp_path / "b", b"B"), "t1")
    digest_a = entry.file_digest(str(tmp_path / "a/layer.tar"))[0]
    shutil.copyfile(tmp_path / "b/layer.tar", blob_path(reg, digest_a))
    dest = tmp_path / "pulls"
    dest.mkdir()
    with pytest.raises(Refused, match=f"blob {digest_a}: the registry served other bytes"):
        entry.pull(c, "step-" + "a" * 64, "step", "a" * 64, ["layer.tar", "meta.json"], str(dest), 1 << 30)
    assert list(dest.iterdir()) == []


def test_another_entrys_manifest_under_a_tag_is_refused(reg, tmp_path):
    """Step B's whole manifest put under step A's tag: every blob verifies,
    and the config names key B, so it is refused for A."""
    c = client(reg)
    entry.push(c, "step-" + "b" * 64, "step", "b" * 64, two_files(tmp_path / "b", b"B"), "t1")
    c.put_manifest("step-" + "a" * 64, c.get_manifest("step-" + "b" * 64))
    with pytest.raises(Refused, match="holds the entry of step b+, not of this step"):
        entry.pull(c, "step-" + "a" * 64, "step", "a" * 64, ["layer.tar", "meta.json"], str(tmp_path), 1 << 30)
    # A manifest whose layers are not those its config names: refused too.
    m = json.loads(c.get_manifest("step-" + "b" * 64))
    m["layers"][0], m["layers"][1] = m["layers"][1], m["layers"][0]
    c.put_manifest("step-" + "b" * 64, json.dumps(m).encode())
    with pytest.raises(Refused, match="do not name the same files"):
        entry.pull(c, "step-" + "b" * 64, "step", "b" * 64, ["layer.tar", "meta.json"], str(tmp_path), 1 << 30)


def test_wrong_credentials_and_no_credentials_are_named(reg, tmp_path, monkeypatch):
    bad = tmp_path / "bad-auth.json"
    bad.write_text(json.dumps({"auths": {reg["addr"]: {"auth": "cnVubmVyOndyb25n"}}}))  # runner:wrong
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(bad))
    with pytest.raises(Unavailable, match="refused the credentials"):
        Registry(reg["ref"], reg["certs"]).get_manifest("x")
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "absent.json"))
    with pytest.raises(Unavailable, match="asks for credentials, and the auth file has none"):
        Registry(reg["ref"], reg["certs"]).get_manifest("x")
    monkeypatch.setenv("REGISTRY_AUTH_FILE", reg["auth"])
    with pytest.raises(Unavailable, match="CERTIFICATE_VERIFY_FAILED"):
        Registry(reg["ref"], str(tmp_path)).get_manifest("x")   # TLS is verified: the test CA is not the system's


@contextlib.contextmanager
def served_artifact(tmp_path: pathlib.Path, data: bytes):
    """An artifact on a loopback HTTP server and a lock pinning it: (lock, server dir)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "tool.bin").write_bytes(data)
    with serve_directory(site) as s:
        lock = tmp_path / "tool.lock"
        lock.write_text(f"[tool]\nversion = 1.0\nurl = {s.url('tool.bin')}\n"
                        f"sha256 = {hashlib.sha256(data).hexdigest()}\n")
        yield lock, site


def pinfetch(tools, env: dict, lock: pathlib.Path, cache: pathlib.Path, out: pathlib.Path):
    return subprocess.run([PY, "-m", "regcache", "pinfetch", "--", tools.path("pinfetch"), "--lock", str(lock),
                           "--name", "tool", "--output", str(out), "--cache", str(cache)],
                          env=env, capture_output=True, text=True)


def ledger_lines(p: pathlib.Path) -> list:
    return p.read_text().split("\n")[:-1] if p.exists() else []


def test_an_artifact_fetched_once_reaches_a_second_cache_through_the_registry(reg, tmp_path, release_tools):
    data = os.urandom(100_000)
    with served_artifact(tmp_path, data) as (lock, site):
        la = tmp_path / "ledger-a"
        cp = pinfetch(release_tools, env_for(reg, la), lock, tmp_path / "cache-a", tmp_path / "out-a")
        assert cp.returncode == 0, cp.stderr
        assert ledger_lines(la) == ["got artifact fetched", "pushed pin"]
        (site / "tool.bin").unlink()   # the origin has it no more
        lb = tmp_path / "ledger-b"
        cp = pinfetch(release_tools, env_for(reg, lb), lock, tmp_path / "cache-b", tmp_path / "out-b")
        assert cp.returncode == 0, cp.stderr
        assert ledger_lines(lb) == ["got artifact registry"]
        assert (tmp_path / "out-b").read_bytes() == data
        # A read-only runner pushes nothing; the origin is back for it.
        (site / "tool.bin").write_bytes(data)
        client(reg).delete_manifest("sha256:" + hashlib.sha256(
            client(reg).get_manifest(f"pin-sha256-{hashlib.sha256(data).hexdigest()}")).hexdigest())
        lc = tmp_path / "ledger-c"
        cp = pinfetch(release_tools, env_for(reg, lc, CACHE_REGISTRY_PUSH="0"), lock, tmp_path / "cache-c",
                      tmp_path / "out-c")
        assert cp.returncode == 0 and ledger_lines(lc) == ["got artifact fetched"], cp.stderr
        assert client(reg).tags() == []


def test_another_artifact_under_a_pins_tag_is_refused_and_fetched(reg, tmp_path, release_tools):
    """A well-formed entry whose bytes are not the pinned ones (as one who
    may push could plant): the pin refuses it, and pinfetch fetches."""
    data = os.urandom(50_000)
    hx = hashlib.sha256(data).hexdigest()
    other = tmp_path / "other.bin"
    other.write_bytes(b"not the artifact")
    entry.push(client(reg), f"pin-sha256-{hx}", "pin", f"sha256:{hx}", [("artifact", str(other))])
    with served_artifact(tmp_path, data) as (lock, _):
        led = tmp_path / "ledger"
        cp = pinfetch(release_tools, env_for(reg, led), lock, tmp_path / "cache", tmp_path / "out")
    assert cp.returncode == 0, cp.stderr
    assert "artifact tool refused" in cp.stderr and "its bytes are not those [tool] pins" in cp.stderr
    assert ledger_lines(led)[0] == "got artifact fetched"
    assert (tmp_path / "out").read_bytes() == data


def test_a_registry_that_is_gone_is_one_line_and_a_local_fetch(reg, tmp_path, release_tools):
    data = os.urandom(10_000)
    stop_process(reg["proc"])
    with served_artifact(tmp_path, data) as (lock, _):
        led = tmp_path / "ledger"
        env = env_for(reg, led)
        first = pinfetch(release_tools, env, lock, tmp_path / "cache", tmp_path / "out")
        second = pinfetch(release_tools, env, lock, tmp_path / "cache2", tmp_path / "out2")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    lines = [ln for ln in first.stderr.splitlines() if "cache registry" in ln]
    assert len(lines) == 1 and "unreachable" in lines[0] and "goes on with its local cache" in lines[0], first.stderr
    assert "cache registry" not in second.stderr
    assert ledger_lines(led) == ["down", "got artifact fetched", "got artifact fetched"]
    summary = subprocess.run([PY, "-m", "regcache", "summary", str(led)], env=env, capture_output=True, text=True)
    assert f"artifacts 0 local, 0 from the registry, 2 fetched; registry {reg['ref']}: unused" in summary.stderr


def staged_steps(d: pathlib.Path) -> dict:
    """A template's staged steps as template.sh leaves them for stage."""
    (d / "tree").mkdir(parents=True)
    (d / "steps.json").write_text(json.dumps({"env": {}, "templates": [{"name": "t", "steps": [
        {"type": "RUN", "args": ["echo one"]}, {"type": "RUN", "args": ["echo two"]}]}]}))
    return d


def stage(d: pathlib.Path, cache: pathlib.Path, env: dict, tenant: str | None, folder: str):
    cmd = [PY, "-m", "template.e2b.step_cache", "stage", "--steps", str(d / "steps.json"), "--tree", str(d / "tree"),
           "--scope", folder, "--base-id", "flavor:e2b-rt trixie", "--cache", str(cache), "--max-mb", "100",
           "--config", str(d / "cfg.json"), "--out", str(d / "staged")]
    if tenant:
        cmd.insert(4, f"--tenant={tenant}")
    return subprocess.run(cmd, env=env, capture_output=True, text=True)


def store(d: pathlib.Path, env: dict):
    """What a build that ran both steps leaves: their layers, vouched by its log."""
    made = d / "made"
    made.mkdir()
    log = []
    for pos in (1, 2):
        (made / f"{pos:04d}.tar").write_bytes(f"layer {pos}".encode() * 100)
        (made / f"{pos:04d}.json").write_text(json.dumps({"version": 1, "base": "x"}) + "\n")
        log.append(f"e2b-step-cache: step {pos:04d} tar={hashlib.sha256((made / f'{pos:04d}.tar').read_bytes()).hexdigest()} "
                   f"meta={hashlib.sha256((made / f'{pos:04d}.json').read_bytes()).hexdigest()}")
    (d / "log").write_text("\n".join(log) + "\n")
    return subprocess.run([PY, "-m", "template.e2b.step_cache", "store", "--config", str(d / "cfg.json"),
                           "--made", str(made), "--log", str(d / "log")], env=env, capture_output=True, text=True)


def test_step_layers_are_shared_per_tenant_across_hosts(reg, tmp_path):
    """Host A's vouched layers reach host B (another cache, the template at
    another path) for the same tenant; tenant b gets none; no tenant= with
    a registry is refused."""
    a = staged_steps(tmp_path / "a")
    env = env_for(reg, tmp_path / "ledger-a")
    assert stage(a, tmp_path / "cache-a", env, "t1", "/runner1/work/tpl").returncode == 0
    cp = store(a, env)
    assert cp.returncode == 0, cp.stderr
    assert ledger_lines(tmp_path / "ledger-a") == ["got step run", "got step run", "pushed step", "pushed step"]
    b = staged_steps(tmp_path / "b")
    env = env_for(reg, tmp_path / "ledger-b")
    cp = stage(b, tmp_path / "cache-b", env, "t1", "/elsewhere/tpl")
    assert cp.returncode == 0 and "2 of 2 steps found (2 from the registry)" in cp.stderr, cp.stderr
    for n in ("0001.tar", "0002.json"):
        assert (b / "staged" / n).read_bytes() == (a / "made" / n).read_bytes()
    c = staged_steps(tmp_path / "c")
    cp = stage(c, tmp_path / "cache-c", env_for(reg, tmp_path / "ledger-c"), "t2", "/runner1/work/tpl")
    assert cp.returncode == 0 and "0 of 2 steps found" in cp.stderr, cp.stderr
    assert not (c / "staged" / "0001.tar").exists()
    e = staged_steps(tmp_path / "e")
    cp = stage(e, tmp_path / "cache-e", env_for(reg, tmp_path / "ledger-e"), None, "/runner1/work/tpl")
    assert cp.returncode == 1 and "no tenant= is set: set tenant=NAME" in cp.stderr, cp.stderr


def test_without_a_registry_the_step_cache_is_local_and_counted(tmp_path):
    """No cache_registry: stage finds what store kept, and the ledger counts."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), CACHE_LEDGER=str(tmp_path / "ledger"))
    env.pop("CACHE_REGISTRY", None)
    a = staged_steps(tmp_path / "a")
    cp = stage(a, tmp_path / "cache", env, None, "/t")
    assert cp.returncode == 0 and "0 of 2 steps found" in cp.stderr, cp.stderr
    cp = store(a, env)
    assert cp.returncode == 0 and "2 layers kept, 0 refused" in cp.stderr, cp.stderr
    b = staged_steps(tmp_path / "b")
    cp = stage(b, tmp_path / "cache", env, None, "/t")
    assert cp.returncode == 0 and "2 of 2 steps found" in cp.stderr and "registry" not in cp.stderr, cp.stderr
    assert ledger_lines(tmp_path / "ledger") == ["got step run", "got step run"]


def test_prune_removes_old_entries_by_kind(reg, tmp_path):
    c = client(reg)
    entry.push(c, "step-" + "a" * 64, "step", "a" * 64, two_files(tmp_path / "a", b"A"), "t1")
    entry.push(c, "pin-sha256-" + "b" * 64, "pin", "sha256:" + "b" * 64, [("artifact", str(tmp_path / "a/meta.json"))])
    env = env_for(reg, tmp_path / "ledger")

    def prune(*args):
        return subprocess.run([PY, "-m", "regcache", "prune", *args], env=env, capture_output=True, text=True)
    cp = prune("--older-than-days", "0", "--dry-run")
    assert cp.returncode == 0 and "2 entries would go" in cp.stderr, cp.stderr
    assert sorted(c.tags()) == ["pin-sha256-" + "b" * 64, "step-" + "a" * 64]
    cp = prune("--older-than-days", "1")
    assert cp.returncode == 0 and "0 entries removed, 2 kept" in cp.stderr, cp.stderr
    cp = prune("--older-than-days", "0", "--kind", "pin")
    assert cp.returncode == 0 and "1 entries removed" in cp.stderr, cp.stderr
    assert c.tags() == ["step-" + "a" * 64]
    cp = prune("--older-than-days", "0", "--tenant", "t2")
    assert "0 entries removed, 1 kept" in cp.stderr and c.tags() == ["step-" + "a" * 64], cp.stderr


@pytest.mark.parametrize("ref,push,message", [
    ("https://r.example/cache", "1", "without a scheme"),
    ("cache-only", "1", "not REGISTRY/REPO"),
    ("r.example:5000/Team/Cache", "1", "is not a valid repository name"),
    ("r.example:5000/team/cache", "2", "cache_registry_push=2: 1 (push what the build made) or 0"),
])
def test_bad_settings_are_named(ref, push, message):
    cp = subprocess.run([PY, "-m", "regcache", "check"], capture_output=True, text=True,
                        env=dict(os.environ, PYTHONPATH=str(ROOT), CACHE_REGISTRY=ref, CACHE_REGISTRY_PUSH=push))
    assert cp.returncode == 2 and message in cp.stderr, cp.stderr
