"""`make repro` of an E2B template and the step cache (template/README.md,
"The step cache"), run by name from the image workflow (ci/image.yml): its
two fresh builds are repeat builds that do not fit in make test's hour."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import e2b_example  # noqa: E402
import testimages  # noqa: E402

from_cache = ": from the step cache"


def test_make_repro_runs_every_step(tmp_path):
    """`make repro`'s two builds run every step, whatever the cache holds
    (the example's layers are in it): what they compare is what the steps
    make now, and what a RUN fetched is named as unpinned."""
    e2b_example.built_or_fail()
    src = testimages.ROOT / "out" / "test-templates-src" / "e2b-sdk"
    cp = testimages.make("e2b-base", tmp_path / "out", "repro", f"template={src}")
    assert "step cache" not in cp.stderr and from_cache not in cp.stderr, cp.stderr[-3000:]
    assert cp.stderr.count("template: step 0 RUN apt-get update") == 2, cp.stderr[-3000:]
    assert "have the network, as on E2B" in cp.stderr, cp.stderr[-3000:]
    assert cp.returncode == 0, cp.stderr[-3000:]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))
