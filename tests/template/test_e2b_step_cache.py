"""The step cache of E2B templates (template/README.md, "The step cache"):
real builds (the example's on e2b-base, as E2B's `base`; the others on
e2b-rt, named by its flavor name) that take unchanged steps'
layers from the cache and give the bytes a build without it gives; force;
layers a step forges, which are not kept; then the host half's rules
(template/e2b/step_cache.py) without a build: the keys, the log's vouching,
the copy and the cap."""
import copy
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import e2b_example  # noqa: E402
import testimages  # noqa: E402
from template.e2b import step_cache  # noqa: E402

from_cache = ": from the step cache"


def outputs(out: pathlib.Path, name: str) -> tuple:
    d = out / name
    return testimages.sha256_file(d / "rootfs.ext4"), (d / "oci" / "index.json").read_bytes()


def on_e2b_rt(folder: pathlib.Path) -> None:
    """FOLDER's e2b.template.json from its template.py (the real SDK), on e2b-rt."""
    e2b_example.sdk_json(folder)
    j = json.loads((folder / "e2b.template.json").read_text())
    assert j.pop("fromTemplate") == "base", j
    (folder / "e2b.template.json").write_text(json.dumps({**j, "fromTemplate": "e2b-rt"}))


def build(folder: pathlib.Path, out: pathlib.Path, *args):
    """The template in FOLDER, with the session's recipes and the cache of
    its base: the example's fromTemplate base is e2b-base, the made-up
    ones here say e2b-rt."""
    base = json.loads((folder / "e2b.template.json").read_text()).get("fromTemplate")
    cp = testimages.make("e2b-rt" if base == "e2b-rt" else "e2b-base", out, "image", f"template={folder}", *args)
    assert cp.returncode == 0, cp.stderr[-4000:]
    return cp


@pytest.mark.build
def test_an_unchanged_template_comes_from_the_cache_and_gives_the_same_bytes(tmp_path):
    """The example, built once by the session (its layers kept), again: every
    step from the cache; and the bytes are a build's without the cache."""
    example = e2b_example.built_or_fail()
    src = testimages.ROOT / "out" / "test-templates-src" / "e2b-sdk"
    n = len(json.loads((src / "e2b.template.json").read_text())["steps"])
    assert example.ok and "layers kept, 0 refused" in example.cp.stderr, example.cp.stderr[-3000:]
    cached = build(src, tmp_path / "cached")
    assert f"template: step cache: {n} of {n} steps found" in cached.stderr, cached.stderr[-3000:]
    assert cached.stderr.count(from_cache) == n, cached.stderr[-3000:]
    fresh = build(src, tmp_path / "fresh", "step_cache=0")
    assert "step cache" not in fresh.stderr and from_cache not in fresh.stderr
    assert outputs(tmp_path / "cached", "e2b-sdk") == outputs(tmp_path / "fresh", "e2b-sdk")


@pytest.mark.build
def test_a_changed_file_runs_its_step_and_the_ones_after(tmp_path):
    """The example's steps on e2b-rt (the step cache does not care which
    base; e2b-rt's builds take half the time of e2b-base's)."""
    d = tmp_path / "e2b-sdk"
    shutil.copytree(e2b_example.EXAMPLE, d, ignore=shutil.ignore_patterns("e2b.template.json", "__pycache__"))
    on_e2b_rt(d)
    first = build(d, tmp_path / "out")
    assert "template: step cache: 0 of 7 steps found" in first.stderr, first.stderr[-3000:]
    assert "template: step cache: 7 layers kept, 0 refused" in first.stderr, first.stderr[-3000:]
    with open(d / "app/static/index.html", "a") as f:
        f.write("<p>changed</p>\n")
    on_e2b_rt(d)
    second = build(d, tmp_path / "out")
    # RUN apt-get, USER, WORKDIR, COPY server.py from the cache; COPY static (changed) and after, run.
    assert "template: step cache: 4 of 7 steps found" in second.stderr, second.stderr[-3000:]
    for i, kind in enumerate(("RUN", "USER", "WORKDIR", "COPY")):
        assert f"template: step {i} {kind} " in second.stderr and second.stderr.count(from_cache) == 4
    assert "template: step 4 COPY app/static static app \n" in second.stderr
    t = tmp_path / "out/e2b-sdk/work/mkosi-out/image"
    assert (t / "opt/app/static/index.html").read_text().endswith("<p>changed</p>\n")
    assert (t / "usr/bin/python3").exists() and (t / "opt/app/build-info.txt").read_text() == "built by app in /opt/app\n"
    uid = (t / "opt/app/server.py").stat().st_uid
    assert uid != 0 and (t / "opt/app/static/index.html").stat().st_uid == uid
    assert "template: step cache: 3 layers kept, 0 refused" in second.stderr


def entry_state(entry: pathlib.Path) -> tuple:
    return entry.stat().st_ino, {p.name: testimages.sha256_file(p) for p in entry.iterdir()}


@pytest.mark.build
def test_force_runs_its_step_and_the_ones_after(tmp_path):
    d = tmp_path / "forced"
    d.mkdir()
    # The second step also tries to change the layers handed to it (read-only).
    tamper = "for f in ${SRCDIR:-/work/src}/e2b-step-cache/*; do echo tampered >> $f; done 2>/dev/null; true"
    steps = [{"type": "RUN", "args": ["date +%s%N > /one", "root"]},
             {"type": "RUN", "args": [f"date +%s%N > /two; {tamper}", "root"], "force": True},
             {"type": "RUN", "args": ["date +%s%N > /three", "root"]}]
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-rt", "steps": steps}))
    t = tmp_path / "out/forced/work/mkosi-out/image"
    build(d, tmp_path / "out")
    before = [(t / n).read_text() for n in ("one", "two", "three")]
    cache = testimages.CACHE / "e2b-steps"
    layers = {e: entry_state(e) for e in cache.iterdir() if not e.name.startswith(".")}
    second = build(d, tmp_path / "out")
    assert "template: step cache: 1 of 3 steps found (force from there on)" in second.stderr, second.stderr[-3000:]
    after = [(t / n).read_text() for n in ("one", "two", "three")]
    assert after[0] == before[0] and after[1] != before[1] and after[2] != before[2]
    # An entry kept in place (not one this build replaced) has the bytes it had: layer 1's at least.
    kept = [e for e, st in layers.items() if e.exists() and e.stat().st_ino == st[0]]
    assert kept and all(entry_state(e) == layers[e] for e in kept)


@pytest.mark.build
def test_a_layer_a_step_forges_is_not_kept(tmp_path):
    """A step prints a cache line of its own for its own layer (two lines:
    neither is believed) and writes the next step's layer into the build's
    output (so that step's own layer cannot be recorded): nothing of either
    is kept, and the build itself goes on."""
    d = tmp_path / "forger"
    d.mkdir()
    zeros = "0" * 64
    forge = (f"echo 'e2b-step-cache: step 0001 tar={zeros} meta={zeros}'; o=${{OUTPUTDIR:-/work/out}}/e2b-step-cache; "
             "mkdir -p $o && echo forged > $o/0002.tar && echo '{}' > $o/0002.json")
    steps = [{"type": "RUN", "args": [forge, "root"]}, {"type": "RUN", "args": ["echo second > /second", "root"]}]
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-rt", "steps": steps}))
    cp = build(d, tmp_path / "out")
    err = cp.stderr
    assert "step 1's layer is not kept: the build log does not vouch for it with exactly one line" in err, err[-3000:]
    assert "template: step cache: step 2 not recorded" in err, err[-3000:]
    # What was in its place, the forged files, went with the failed recording.
    assert "0 layers kept, 1 refused" in err, err[-3000:]
    assert (tmp_path / "out/forger/work/mkosi-out/image/second").read_text() == "second\n"
    again = build(d, tmp_path / "out")
    assert "template: step cache: 0 of 2 steps found" in again.stderr


@pytest.mark.build
def test_a_line_forged_after_recording_stopped_keeps_nothing(tmp_path):
    """Issue 49, finding 13: step 1 writes step 2's layer into the build's
    output, so step 2's own cannot be recorded and recording stops there;
    step 3 then writes a layer at 0003 and prints the one line for it, with
    the right digests. Nothing at or after step 2 is kept."""
    d = tmp_path / "stopped"
    d.mkdir()
    o = "o=${OUTPUTDIR:-/work/out}/e2b-step-cache; mkdir -p $o"
    sha = "$(sha256sum < $o/0003.{} | cut -d' ' -f1)"
    steps = [{"type": "RUN", "args": [f"{o} && echo taken > $o/0002.tar && echo '{{}}' > $o/0002.json", "root"]},
             {"type": "RUN", "args": ["echo second > /second", "root"]},
             {"type": "RUN", "args": [f"{o} && echo forged > $o/0003.tar && echo '{{}}' > $o/0003.json && "
                                      f"echo \"e2b-step-cache: step 0003 tar={sha.format('tar')} "
                                      f"meta={sha.format('json')}\"", "root"]}]
    (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-rt", "steps": steps}))
    err = build(d, tmp_path / "out").stderr
    assert "e2b-step-cache: recording stopped at step 0002" in err, err[-3000:]
    assert "step 3's layer is not kept: recording stopped at step 2" in err, err[-3000:]
    assert "template: step cache: 1 layers kept, 1 refused" in err, err[-3000:]
    again = build(d, tmp_path / "out")
    assert "template: step cache: 1 of 3 steps found" in again.stderr, again.stderr[-3000:]


# tenant= in real builds (another tenant's build gets none of a tenant's
# layers, locally or through the shared cache's registry; an odd name is
# refused): tests/template/test_cache_registry.py.


# The host half, without a build.

def staged(tmp_path: pathlib.Path, steps: list, force: bool = False, scope: str = "/t", base: str = "flavor:e2b-rt"):
    tree = tmp_path / "tree"
    (tree / "usr/lib/e2b-template-build/copy/t/0000").mkdir(parents=True, exist_ok=True)
    (tree / "usr/lib/e2b-template-build/copy/t/0000/f").write_text("one\n")
    for s in steps:
        if s["type"] == "COPY":
            s["staged"] = "/usr/lib/e2b-template-build/copy/t/0000/f"
    (tree / "usr/lib/e2b-template-build/steps.json").write_text(json.dumps(
        {"templates": [{"name": "t", "force": force, "steps": steps, "start": None}], "env": {}}))
    return {"steps": str(tree / "usr/lib/e2b-template-build/steps.json"), "tree": str(tree), "scope": scope,
            "base_id": base, "cache": str(tmp_path / "cache"), "max_mb": 1}


STEPS = [{"type": "RUN", "args": ["a"]}, {"type": "COPY", "args": ["f", "/f", "", ""]},
         {"type": "RUN", "args": ["b"]}]


def steps() -> list:
    return copy.deepcopy(STEPS)


def test_the_keys_chain_and_force_runs_from_its_step_on(tmp_path):
    keys = step_cache.chain_keys(staged(tmp_path, steps()))
    assert len({k for k, _ in keys}) == 3 and not any(f for _, f in keys)
    other = [dict(s) for s in STEPS]
    other[2] = {"type": "RUN", "args": ["c"]}
    changed = step_cache.chain_keys(staged(tmp_path, other))
    assert changed[:2] == keys[:2] and changed[2] != keys[2]
    # A COPY's files are in its key and every key after it.
    cfg = staged(tmp_path, steps())
    (pathlib.Path(cfg["tree"]) / "usr/lib/e2b-template-build/copy/t/0000/f").write_text("two\n")
    files = step_cache.chain_keys(cfg)
    assert files[0] == keys[0] and files[1] != keys[1] and files[2] != keys[2]
    # Another folder or another base: no key in common.
    for kw in ({"scope": "/other"}, {"base": "flavor:e2b-ci"}):
        assert not {k for k, _ in keys} & {k for k, _ in step_cache.chain_keys(
            staged(tmp_path, steps(), **kw))}
    forced = [dict(s) for s in STEPS]
    forced[1] = dict(forced[1], force=True)
    assert [f for _, f in step_cache.chain_keys(staged(tmp_path, forced))] == [False, True, True]
    assert [f for _, f in step_cache.chain_keys(staged(tmp_path, steps(), force=True))] \
        == [True, True, True]


def test_store_keeps_only_what_the_log_vouches_for(tmp_path):
    cfg = staged(tmp_path, steps())
    step_cache.stage(cfg, str(tmp_path / "first"))   # the keys, for store; nothing in the cache yet
    assert os.listdir(tmp_path / "first") == []
    made = tmp_path / "made"
    made.mkdir()
    lines = []
    for pos in (1, 2, 3):
        (made / f"{pos:04d}.tar").write_bytes(b"tar %d" % pos)
        (made / f"{pos:04d}.json").write_bytes(b"{}")
        sha = [hashlib.sha256(b"tar %d" % pos).hexdigest(), hashlib.sha256(b"{}").hexdigest()]
        lines.append(f"e2b-step-cache: step {pos:04d} tar={sha[0]} meta={sha[1]}")
    # Step 2: a second line (forged); step 3: the file is not what the line says.
    lines.append(f"e2b-step-cache: step 0002 tar={'0' * 64} meta={'0' * 64}")
    (made / "0003.tar").write_bytes(b"changed after")
    log = tmp_path / "log"
    log.write_text("noise\n" + "\n".join(lines) + "\n")
    assert step_cache.store(cfg, str(made), str(log)) == 0
    keys = [k for k, _ in step_cache.chain_keys(cfg)]
    cache = pathlib.Path(cfg["cache"])
    assert sorted(p.name for p in cache.iterdir()) == [keys[0]]
    assert (cache / keys[0] / "layer.tar").read_bytes() == b"tar 1"
    # A layer that is a symlink is not followed, whatever the log says.
    (made / "0001.tar").unlink()
    (made / "0001.tar").symlink_to(made / "0002.tar")
    shutil.rmtree(cache)
    assert step_cache.store(cfg, str(made), str(log)) == 0
    assert not [p for p in cache.iterdir() if not p.name.startswith(".")]
    # stage: the first layers, up to the first missing.
    (made / "0001.tar").unlink()
    (made / "0001.tar").write_bytes(b"tar 1")
    step_cache.store(cfg, str(made), str(log))
    step_cache.stage(cfg, str(tmp_path / "staged"))
    assert sorted(os.listdir(tmp_path / "staged")) == ["0001.json", "0001.tar"]


def made_layers(made: pathlib.Path, positions) -> list:
    """Layers at POSITIONS in MADE, each with its one vouching line."""
    made.mkdir(exist_ok=True)
    lines = []
    for pos in positions:
        (made / f"{pos:04d}.tar").write_bytes(b"tar %d" % pos)
        (made / f"{pos:04d}.json").write_bytes(b"{}")
        lines.append(f"e2b-step-cache: step {pos:04d} tar={hashlib.sha256(b'tar %d' % pos).hexdigest()} "
                     f"meta={hashlib.sha256(b'{}').hexdigest()}")
    return lines


def kept(cfg) -> list:
    """The positions whose layers are in the cache."""
    keys = [k for k, _ in step_cache.chain_keys(cfg)]
    have = {p.name for p in pathlib.Path(cfg["cache"]).iterdir()} if os.path.isdir(cfg["cache"]) else set()
    return [i + 1 for i, k in enumerate(keys) if k in have]


def test_store_keeps_nothing_from_where_recording_stopped(tmp_path):
    """Issue 49, finding 13: once recording a layer failed (layers.py says
    so on the log), a later step's line of its own, alone for its
    position and matching the files it wrote, keeps nothing."""
    cfg = staged(tmp_path, steps())
    step_cache.stage(cfg, str(tmp_path / "first"))
    made = tmp_path / "made"
    lines = made_layers(made, (1, 2, 3))
    log = tmp_path / "log"
    log.write_text("\n".join([lines[0], "template: step cache: step 2 not recorded, nor the steps after it: x",
                              "e2b-step-cache: recording stopped at step 0002", lines[2]]) + "\n")
    assert step_cache.store(cfg, str(made), str(log)) == 0
    assert kept(cfg) == [1]
    # A stop line a step printed itself only keeps less; one that ran into a step's output still counts.
    shutil.rmtree(cfg["cache"])
    log.write_text("\n".join(lines) + "\nsome output without its newlinee2b-step-cache: recording stopped at step 0003\n")
    assert step_cache.store(cfg, str(made), str(log)) == 0
    assert kept(cfg) == [1, 2]


def test_store_reads_the_made_folder_only_as_its_own(tmp_path):
    """Issue 49, finding 10: the build's layer folder lies in its output,
    which a step can write; a link there to a folder elsewhere (whose
    layers the log even vouches for) keeps nothing, and neither does a
    layer larger than the cache's cap."""
    cfg = staged(tmp_path, steps())
    step_cache.stage(cfg, str(tmp_path / "first"))
    elsewhere = tmp_path / "elsewhere"
    log = tmp_path / "log"
    log.write_text("\n".join(made_layers(elsewhere, (1, 2))) + "\n")
    made = tmp_path / "made"
    made.symlink_to(elsewhere)
    with pytest.raises(step_cache.CacheError, match="not a directory of the build's own"):
        step_cache.store(cfg, str(made), str(log))
    assert kept(cfg) == []
    made.unlink()
    made.mkdir()
    lines = made_layers(made, (1,))
    with open(made / "0001.tar", "wb") as f:
        f.truncate(2 << 20)   # over the 1 MB cap
    log.write_text(f"e2b-step-cache: step 0001 tar={testimages.sha256_file(made / '0001.tar')} "
                   f"meta={lines[0].rsplit('meta=', 1)[1]}\n")
    assert step_cache.store(cfg, str(made), str(log)) == 0
    assert kept(cfg) == []


def test_a_tenant_scopes_the_keys(tmp_path):
    """tenant=: the same folder under two tenants shares no key; the same
    tenant and folder, all; no tenant keeps the folder's keys of before."""
    plain = step_cache.chain_keys(staged(tmp_path, steps()))
    a = step_cache.chain_keys(dict(staged(tmp_path, steps()), tenant="a"))
    b = step_cache.chain_keys(dict(staged(tmp_path, steps()), tenant="b"))
    assert a == step_cache.chain_keys(dict(staged(tmp_path, steps()), tenant="a"))
    assert not {k for k, _ in a} & {k for k, _ in b} and not {k for k, _ in a} & {k for k, _ in plain}
    # The folder still counts under one tenant: a tenant's two folders stay apart.
    assert not {k for k, _ in a} & {k for k, _ in step_cache.chain_keys(dict(staged(tmp_path, steps(), scope="/u"),
                                                                              tenant="a"))}
    cfg = staged(tmp_path, steps())
    for bad in ("", "a b", "../x", "-a", "a" * 65, "é"):
        cp = subprocess.run(["/usr/bin/python3", "-m", "template.e2b.step_cache", "stage", "--steps", cfg["steps"],
                             "--tree", cfg["tree"], "--scope", "/t", f"--tenant={bad}", "--base-id", "x",
                             "--cache", cfg["cache"], "--max-mb", "1", "--config", str(tmp_path / "c.json"),
                             "--out", str(tmp_path / "o")], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(testimages.ROOT)})
        assert cp.returncode == 1 and "not a tenant name" in cp.stderr, (bad, cp.stderr)


def test_the_cap_removes_the_least_recently_used(tmp_path):
    cache = tmp_path / "cache"
    for i, key in enumerate(("a" * 64, "b" * 64, "c" * 64)):
        (cache / key).mkdir(parents=True)
        (cache / key / "layer.tar").write_bytes(b"x" * (600 << 10))
        os.utime(cache / key, (time.time() - 100 + i, time.time() - 100 + i))
    os.utime(cache / ("a" * 64))   # used last
    left = step_cache.prune(str(cache), 1)
    assert sorted(p.name for p in cache.iterdir()) == ["a" * 64] and left == 600 << 10


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
