"""The E2B SDK's install helpers in a real template build on e2b-base
(`from_template("base")`, its JSON written by E2B's own Python SDK):
`pip_install` and `npm_install` as the SDK writes them (as root, global),
and `pip_install(g=False)` as the user. The packages come with the
template (tests/sdk/package_index.py's wheels and npm tarball, copied in),
and pip and npm install them without an index (PIP_NO_INDEX and
PIP_FIND_LINKS, a tarball's path for npm): the build sandbox keeps the build
host's loopback out, so no index of the test's can be served to it."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "sdk"))
import e2b_example  # noqa: E402
import package_index  # noqa: E402
import testimages  # noqa: E402

# Builds or boots an image: make test runs it, make check does not. Beside
# the one group, after e2b-base's build (tests/conftest.py), without the step
# cache, which the one group's template builds on e2b-base use.
pytestmark = [pytest.mark.build, pytest.mark.builds_apart("e2b-base")]

PACKAGES = "/opt/e2b-probe-packages"
TEMPLATE = f'''from e2b import Template

template = (
    Template()
    .from_template("base")
    .copy("packages", "{PACKAGES}")
    .set_envs({{"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "{PACKAGES}"}})
    .pip_install(["e2b-probe-tplroot"])
    .set_user("user")
    .pip_install(["e2b-probe-tpluser"], g=False)
    .set_user("root")
    .npm_install(["{PACKAGES}/e2b-probe-tplnpm-1.0.0.tgz"], g=True)
    .run_cmd("python3 -c 'import e2b_probe_tplroot' && e2b-probe-tplnpm > /opt/npm-ran.txt")
)

if __name__ == "__main__":
    print(Template.to_json(template))
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("installs") / "installs"
    (d / "packages").mkdir(parents=True)
    for name in ("e2b-probe-tplroot", "e2b-probe-tpluser"):
        fname, data = package_index.wheel(name)
        (d / "packages" / fname).write_bytes(data)
    (d / "packages/e2b-probe-tplnpm-1.0.0.tgz").write_bytes(package_index.npm_tarball("e2b-probe-tplnpm"))
    (d / "template.py").write_text(TEMPLATE)
    e2b_example.sdk_json(d)
    out = tmp_path_factory.mktemp("installs-out")
    b = testimages.Built("e2b-base", out / "installs", testimages.build_template(d, "e2b-base", out, "step_cache=0"))
    if not b.ok:
        pytest.fail(b.failure())
    return b


def test_pip_install_as_root_lands_in_usr_local(built):
    assert list(built.tree.glob("usr/local/lib/python3.*/dist-packages/e2b_probe_tplroot/__init__.py"))


def test_pip_install_as_the_user_lands_in_its_site(built):
    assert list(built.tree.glob("home/user/.local/lib/python3.*/site-packages/e2b_probe_tpluser/__init__.py"))
    assert not list(built.tree.glob("usr/local/lib/python3.*/dist-packages/e2b_probe_tpluser"))


def test_npm_install_global_runs_in_a_later_step(built):
    assert (built.tree / "usr/local/lib/node_modules/e2b-probe-tplnpm/index.js").is_file()
    assert (built.tree / "usr/local/bin/e2b-probe-tplnpm").is_symlink()
    assert (built.tree / "opt/npm-ran.txt").read_text() == "e2b-probe-tplnpm\n"
