"""A short run of every libFuzzer target (`make fuzz` runs them for longer).
The seed corpus under tests/fuzz/corpus/<target>/ is copied so the run never
writes into the repository."""
import os
import shutil
import subprocess

import pytest

from harness import BUILD, ROOT, declared

FUZZERS = [BUILD / "fuzz" / name for name in declared("FUZZERS")]
SECONDS = int(os.environ.get("FUZZ_SMOKE_SECONDS", "15"))


@pytest.mark.parametrize("fuzzer", FUZZERS, ids=lambda p: p.name)
def test_fuzz_smoke(fuzzer, tmp_path):
    corpus = tmp_path / "corpus"
    seeds = ROOT / "tests" / "fuzz" / "corpus" / fuzzer.name
    if seeds.is_dir():
        shutil.copytree(seeds, corpus)
    else:
        corpus.mkdir()
    cp = subprocess.run(
        [str(fuzzer), f"-max_total_time={SECONDS}", "-timeout=5", "-rss_limit_mb=1024",
         f"-artifact_prefix={tmp_path}/", str(corpus)],
        capture_output=True, text=True, timeout=SECONDS + 120)
    assert cp.returncode == 0, cp.stderr[-4000:]


def test_every_fuzzer_has_a_seed_corpus():
    """Seeds give the short run above the shapes the parser accepts (an
    invariant on accepted input is checked only once one is found), and
    `make fuzz` runs each target from them."""
    missing = [f.name for f in FUZZERS
               if not any((ROOT / "tests" / "fuzz" / "corpus" / f.name).glob("*"))]
    assert not missing, f"no seeds in tests/fuzz/corpus/ for {missing}: add a few inputs the parser accepts"
