"""The pack stage of e2b-ci is deterministic: os-image/pack.py run again over
the session's e2b-ci tree (tests/testimages.py) gives byte-identical outputs,
the same OCI manifest, layer and ext4 digests as the build's manifest.json.

This is the cheap half of e2b-ci's reproducibility: with upstream's whole
Python stack, two fresh e2b-ci builds cost more than `make test` can afford
on a 2-core machine, so the full two-build check (`make repro flavor=e2b-ci`)
is a gate of the image workflow (ci/image.yml); see os-image/e2b-ci/README.md.
"""
import json

import pytest

from ci_helpers import ROOT, e2b_ci_build, run


@pytest.fixture(scope="module")
def built():
    return e2b_ci_build()


def test_pack_again_gives_the_same_digests(built, tmp_path):
    m = built.manifest
    out = tmp_path / "again"
    cp = run(["/usr/bin/python3", ROOT / "os-image/pack.py", "--tree", built.tree, "--out", out,
              "--flavor", "e2b-ci", "--distro", m["distro"], "--release", m["release"],
              "--epoch", m["source_date_epoch"], "--archives", built.dir / "work/archives.json",
              "--artifacts", built.dir / "work/artifacts.jsonl", "--apt-lists", tmp_path / "no-lists"],
             timeout=3600)
    assert cp.returncode == 0, cp.stderr[-4000:]
    again = json.loads((out / "manifest.json").read_text())
    assert again["outputs"] == m["outputs"]
    assert again["packages"] == m["packages"]
