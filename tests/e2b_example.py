"""examples/templates/e2b-sdk, built once per session (test only): its
e2b.template.json written by the real Python SDK (build/py-sdk) from its
template.py in a copy of the folder (the JSON is never committed), then
`make template=` on e2b-base (its `from_template("base")`) into
out/test-templates/e2b-sdk/. Shared by the
build's checks (tests/template/test_e2b_build.py) and its boot
(tests/boot/test_template_boot.py)."""
from __future__ import annotations

import functools
import pathlib
import shutil
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "sdk"))

import sdk_helpers  # noqa: E402
import testimages  # noqa: E402

NAME = "e2b-sdk"
EXAMPLE = testimages.EXAMPLES / NAME


def sdk_json(folder: pathlib.Path) -> None:
    """folder/e2b.template.json, written by the real SDK from folder/template.py."""
    cp = subprocess.run([str(sdk_helpers.py_sdk()), "template.py"], cwd=folder, capture_output=True, text=True,
                        timeout=120)
    if cp.returncode != 0:
        raise AssertionError(f"{folder}/template.py: {cp.stderr[-2000:]}")
    (folder / "e2b.template.json").write_text(cp.stdout)


def built_or_fail() -> testimages.Built:
    """built(), failing the asking test's fixture when the build failed."""
    b = built()
    if not b.ok:
        pytest.fail(b.failure())
    return b


@functools.lru_cache(maxsize=None)
def built() -> testimages.Built:
    src = testimages.ROOT / "out" / "test-templates-src" / NAME
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("e2b.template.json", "__pycache__"))
    sdk_json(src)
    out = testimages.ROOT / "out" / "test-templates"
    shutil.rmtree(out / NAME, ignore_errors=True)
    return testimages.Built("e2b-base", out / NAME, testimages.build_template(src, "e2b-base", out))
