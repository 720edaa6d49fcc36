"""The session's one builder-mode build, shared by test_builder_build.py and
builder_boot.py: examples/templates/web (busybox httpd on 3000 as the
start command, a file, an env) with its base replaced by the debootstrap-made
Debian image of bases.py, an OCI layout inside the template directory
(`base = oci:team-node:v1`, a path relative to the template), built by
`make image template=DIR` into out/test-builder/web-on-image/.

So one build covers builder mode (our runtime installed onto a base of
one's own) and a template on top of it; `make flavor=e2b-rt base=…` runs
the same build.sh path without a template (ci/image.yml builds it)."""
from __future__ import annotations

import dataclasses
import functools
import pathlib
import shutil
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import bases  # noqa: E402
import testimages  # noqa: E402

NAME = "web-on-image"
LAYOUT = "team-node"  # the base's directory in the template: its name is team-node:v1
OUT = testimages.ROOT / "out" / "test-builder"


@dataclasses.dataclass
class BuilderBuild:
    built: testimages.Built
    template: pathlib.Path
    base_name: str
    base_digest: str


def template_conf() -> str:
    conf = (testimages.EXAMPLES / "web" / "template.conf").read_text()
    conf = conf.replace("name = web\n", f"name = {NAME}\n")
    conf = conf.replace("base = e2b-rt\n", f"base = oci:{LAYOUT}:{bases.REF}\n")
    assert f"name = {NAME}\n" in conf and f"base = oci:{LAYOUT}" in conf, "examples/templates/web changed"
    return conf


@functools.lru_cache(maxsize=None)
def web_on_image() -> BuilderBuild:
    shutil.rmtree(OUT, ignore_errors=True)
    tpl = OUT / "template"
    shutil.copytree(testimages.EXAMPLES / "web", tpl)
    layout = bases.debian_base(tpl / LAYOUT)
    (tpl / "template.conf").write_text(template_conf())
    cp = testimages.build_template(tpl, "e2b-rt", OUT)
    return BuilderBuild(testimages.Built("e2b-rt", OUT / NAME, cp), tpl, f"{LAYOUT}:{bases.REF}",
                        bases.layout_digest(layout, bases.REF))
