"""The shared cache through a registry (regcache/README.md), in real
template builds on e2b-base (make test's second worker builds it, with
caches of its own: tests/testimages.py's base_cache): two checkouts of this commit with their own
out= and caches, and one registry on loopback with TLS and auth
(tests/registry.py). mkosi's package cache and cached base installation are
shared by the two: they come from Debian's archive, not from the registry,
and are not the shared cache's to carry. What the registry carries is then
all the second checkout has: envd's source build, the template's step
layers.

One template, three RUN steps (two write nonces, so a step that runs again
shows), built by:
  A  checkout 1, tenant a: every step runs; its layers and envd are pushed;
  B  checkout 2, fresh caches, tenant a: every step and envd from the
     registry, nothing run or built; the outputs are A's, byte for byte;
  T  checkout 1, tenant b, A's own local cache: nothing of a's (no step
     found, locally or in the registry; new nonces);
  C  checkout 2, fresh step cache, tenant a, after step 2's layer blob in
     the registry was overwritten with step 1's bytes, and with the registry
     stopped while step 3 runs: step 1 from the registry, step 2 refused
     and run, the push at the end one line, the build complete.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import threading

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import testimages  # noqa: E402
from harness import stop_process  # noqa: E402
from registry import tls_registry  # noqa: E402

from regcache.registry import Registry  # noqa: E402

# Builds an image: make test runs it, make check does not; beside the one
# group, after e2b-base's build, on whose caches it starts.
pytestmark = [pytest.mark.build, pytest.mark.builds_apart("e2b-base")]

REPO = "fleet/e2b-cache"
MARK = "e2b-cache-registry-test: step 3 runs"
NONCE = "head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \\n'"
STEPS = [
    {"type": "RUN", "args": [f"{NONCE} > /nonce1", "root"]},
    {"type": "RUN", "args": ["echo two > /two", "root"]},
    # What it prints is MARK; its command, which the log shows too, is not.
    {"type": "RUN", "args": [f"echo \"{MARK.replace('3', '$((1 + 2))')}\"; sleep 4; {NONCE} > /nonce3", "root"]},
]


def second_checkout(dest: pathlib.Path) -> pathlib.Path:
    """This checkout's commit in DEST, with its uncommitted changes and new
    files (so that both build the same sources, and label them alike)."""
    root = testimages.ROOT
    subprocess.run(["git", "clone", "--quiet", "--shared", str(root), str(dest)], check=True)
    diff = subprocess.run(["git", "-C", str(root), "diff", "--binary", "HEAD"], check=True,
                          capture_output=True).stdout
    if diff:
        subprocess.run(["git", "-C", str(dest), "apply", "--binary", "-"], input=diff, check=True)
    new = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--others", "--exclude-standard"], check=True,
                         capture_output=True).stdout.split(b"\0")
    for rel in filter(None, (os.fsdecode(n) for n in new)):
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, dest / rel)
    return dest


def fresh_cache(d: pathlib.Path) -> pathlib.Path:
    """A cache= of nothing but mkosi's: e2b-base's package cache (linked),
    and its cached installation, which the build sandbox mounts by its path
    (hard links of it: a template's build only reads it)."""
    src = testimages.base_cache()
    d.mkdir(parents=True)
    (d / "mkosi").symlink_to(src / "mkosi")
    subprocess.run(["cp", "-al", str(src / "mkosi-incremental"), str(d / "mkosi-incremental")], check=True)
    return d


# The second checkout and the caches: where the build sandbox's own user can
# reach them, as it reaches the session's (a test's tmp_path is root's alone).
PLACE = testimages.CACHE.parent / "test-fleet"


class Fleet:
    def __init__(self, tmp: pathlib.Path, reg: dict):
        self.tmp, self.reg = tmp, reg
        self.checkouts = {1: testimages.ROOT, 2: second_checkout(PLACE / "checkout-2")}
        self.env = dict(os.environ, REGISTRY_AUTH_FILE=reg["auth"])

    def template(self, where: str) -> pathlib.Path:
        d = self.tmp / where / "fleet-tpl"
        d.mkdir(parents=True)
        (d / "e2b.template.json").write_text(json.dumps({"fromTemplate": "e2b-base", "steps": STEPS}))
        return d

    def command(self, checkout: int, folder: pathlib.Path, out: pathlib.Path, cache: pathlib.Path, tenant: str,
                *more: str):
        top = self.checkouts[checkout]
        return ["make", "-C", str(top), "--no-print-directory", "image", "flavor=e2b-base", f"template={folder}",
                f"recipes={testimages.sources().recipes('e2b-base')}", *testimages.sources().make_args("e2b-base"),
                f"build={testimages.ROOT / 'build'}", f"out={out}", f"cache={cache}", f"tenant={tenant}",
                f"cache_registry={self.reg['addr']}/{REPO}", f"cert_dir={self.reg['certs']}", *more]

    def build(self, *args, when_seen=None) -> tuple:
        """(returncode, stderr); WHEN_SEEN(): called once MARK is on the build's output."""
        p = subprocess.Popen(self.command(*args), env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True, errors="replace")
        lines = []
        timer = threading.Timer(testimages.BUILD_TIMEOUT, p.kill)
        timer.start()
        try:
            for line in p.stderr:
                lines.append(line)
                if when_seen and MARK in line:
                    when_seen()
                    when_seen = None
            return p.wait(), "".join(lines)
        finally:
            timer.cancel()


def tree(out: pathlib.Path) -> pathlib.Path:
    return out / "fleet-tpl" / "work/mkosi-out/image"


def digests(out: pathlib.Path) -> tuple:
    d = out / "fleet-tpl"
    return testimages.sha256_file(d / "rootfs.ext4"), (d / "oci" / "index.json").read_bytes()


def test_a_fleet_shares_steps_and_envd_through_the_registry(tmp_path):
    base = testimages.image("e2b-base")
    if not base.ok:
        pytest.fail(base.failure())
    shutil.rmtree(PLACE, ignore_errors=True)
    PLACE.mkdir(parents=True)
    (tmp_path / "registry").mkdir()
    with tls_registry(tmp_path / "registry", "fleet", "fleet-password") as reg:
        fleet = Fleet(tmp_path, reg)
        # A: checkout 1, the session's caches (as e2b-base's build shares them) for all but the step layers.
        cache_a = fresh_cache(PLACE / "cache-a")
        for shared in ("pinfetch", "go", "envd-source"):
            (testimages.CACHE / shared).mkdir(parents=True, exist_ok=True)
            (cache_a / shared).symlink_to(testimages.CACHE / shared)
        folder_a = fleet.template("host-a")
        rc, err = fleet.build(1, folder_a, tmp_path / "out-a", cache_a, "a")
        assert rc == 0, err[-4000:]
        assert "cache: steps 0 local, 0 from the registry, 3 run; envd " in err, err[-3000:]
        assert f"registry {reg['addr']}/{REPO}: 4 entries pushed" in err, err[-3000:]
        a_nonce1, a_nonce3 = ((tree(tmp_path / "out-a") / n).read_text() for n in ("nonce1", "nonce3"))
        a_digests = digests(tmp_path / "out-a")

        # B: checkout 2, its own out= and caches, the template at another path.
        folder_b = fleet.template("host-b")
        rc, err = fleet.build(2, folder_b, tmp_path / "out-b", fresh_cache(PLACE / "cache-b"), "a")
        assert rc == 0, err[-4000:]
        assert "cache: steps 0 local, 3 from the registry, 0 run; envd 0 local, 1 from the registry, 0 built" \
            in err, err[-3000:]
        assert "building envd" not in err and MARK not in err, err[-3000:]
        assert (tree(tmp_path / "out-b") / "nonce1").read_text() == a_nonce1
        assert (tree(tmp_path / "out-b") / "nonce3").read_text() == a_nonce3
        assert digests(tmp_path / "out-b") == a_digests

        # T: tenant b, on host A with A's local step cache: nothing of a's.
        # (pack=0: only A's and B's outputs are compared; the tree is enough here.)
        rc, err = fleet.build(1, folder_a, tmp_path / "out-t", cache_a, "b", "pack=0")
        assert rc == 0, err[-4000:]
        assert "template: step cache: 0 of 3 steps found" in err and "cache: steps 0 local, 0 from the registry, " \
            "3 run" in err, err[-3000:]
        assert (tree(tmp_path / "out-t") / "nonce1").read_text() != a_nonce1

        # C: step 2's layer blob overwritten with step 1's bytes; the
        # registry stopped while step 3 runs.
        layer = step_layers(reg)
        shutil.copyfile(layer["nonce1"], layer["two"])
        cache_c = fresh_cache(PLACE / "cache-c")
        (cache_c / "envd-source").symlink_to(PLACE / "cache-b" / "envd-source")
        rc, err = fleet.build(2, folder_b, tmp_path / "out-c", cache_c, "a", "pack=0",
                              when_seen=lambda: stop_process(reg["proc"]))
        assert rc == 0, err[-4000:]
        assert "step 2's layer from the registry is refused" in err and "served other bytes" in err, err[-3000:]
        down = [ln for ln in err.splitlines() if ln.startswith("cache registry ")]
        assert len(down) == 1 and "unreachable" in down[0] and "goes on with its local cache" in down[0], err[-3000:]
        assert "cache: steps 0 local, 1 from the registry, 2 run" in err and "unused from there on" in err, err[-3000:]
        assert (tree(tmp_path / "out-c") / "nonce1").read_text() == a_nonce1
        assert (tree(tmp_path / "out-c") / "nonce3").read_text() != a_nonce3
        assert "template: step cache: 2 layers kept, 0 refused" in err, err[-3000:]

    odd = subprocess.run(fleet.command(1, folder_a, tmp_path / "out-odd", cache_a, "a/../b"), env=fleet.env,
                         capture_output=True, text=True)
    assert odd.returncode != 0 and "tenant=a/../b: not a tenant name" in odd.stderr, odd.stderr[-3000:]
    assert "template: step cache" not in odd.stderr
    shutil.rmtree(PLACE, ignore_errors=True)


def step_layers(reg: dict) -> dict:
    """The registry's step layer blobs (files in its storage), by the file
    each step wrote: nonce1, two, nonce3."""
    blobs = reg["dir"] / "data/docker/registry/v2/blobs/sha256"
    os.environ["REGISTRY_AUTH_FILE"] = reg["auth"]
    try:
        client = Registry(f"{reg['addr']}/{REPO}", reg["certs"])
        digests = [json.loads(client.get_manifest(t))["layers"][0]["digest"] for t in client.tags()
                   if t.startswith("step-")]
    finally:
        del os.environ["REGISTRY_AUTH_FILE"]
    out = {}
    for d in digests:
        path = blobs / d[7:9] / d[7:] / "data"
        with tarfile.open(path) as t:
            names = {pathlib.PurePath(n).name for n in t.getnames()}
        out.update({n: path for n in ("nonce1", "two", "nonce3") if n in names})
    assert len(out) == 3, (digests, out)
    return out
