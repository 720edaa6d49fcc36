"""e2b-ci's Jupyter kernels (issue 36), against the built tree without a
boot: the kernelspecs on Jupyter's path are exactly the kernels= set, under
the names upstream's server asks for, with argv that exist in the tree; the
manifest and the OCI label list them; every kernel, once a context runs on
it, listens on loopback only. And kernels= refuses a name it does not know
before anything is built.

E2B_TEST_CI_TREE=DIR runs the tree checks against an existing e2b-ci tree
(the manifest is then DIR/../../../manifest.json, the layout of `make image`'s
output, or the checks that need it skip, saying so)."""
import json
import os
import pathlib
import sys

import pytest

from ci_helpers import ROOT, run
from test_ci_server import run_in_stack

sys.path.insert(0, str(ROOT / "tests"))
import testimages  # noqa: E402

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

HERE = pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def built_tree():
    """(tree, its manifest or None)."""
    if os.environ.get("E2B_TEST_CI_TREE"):
        tree = pathlib.Path(os.environ["E2B_TEST_CI_TREE"])
        manifest = tree.parents[2] / "manifest.json"
        return tree, json.loads(manifest.read_text()) if manifest.exists() else None
    built = testimages.image("e2b-ci")
    if not built.ok:
        pytest.fail(built.failure())
    return built.tree, built.manifest


def test_kernelspecs_are_the_chosen_kernels(built_tree):
    tree, manifest = built_tree
    specs = testimages.ci_kernelspecs(tree)
    kernels = testimages.ci_kernels(tree)
    # Nothing else on Jupyter's path (e.g. Debian's own "ir" beside ours).
    assert sorted(specs) == sorted(testimages.CI_KERNELS[k] for k in kernels), specs
    assert kernels[:2] == ["python", "javascript"], f"python and javascript are always in: {kernels}"
    for name, spec in specs.items():
        argv0 = spec["argv"][0]
        assert argv0.startswith("/") and (tree / argv0.lstrip("/")).exists(), f"{name}: {argv0} not in the tree"
        # Every file the argv names (a script, a jar) is there too.
        for arg in spec["argv"][1:]:
            if arg.startswith("/"):
                assert (tree / arg.lstrip("/")).exists(), f"{name}: {arg} not in the tree"
        assert "{connection_file}" in spec["argv"], f"{name}: {spec['argv']}"
    if manifest is None:
        pytest.skip(f"{tree}: no manifest.json beside it; the manifest's kernels are not checked")
    assert manifest["kernels"] == kernels
    assert manifest["labels"]["org.e2b-images.kernels"] == ",".join(kernels)
    # Nothing loosens: the guard's ports are the same three.
    assert manifest["labels"]["org.e2b-images.guarded-ports"] == "49983,49999,8888"


def test_kernels_listen_on_loopback_only(built_tree, tmp_path):
    """One context per kernel through the real server, then every listening
    socket of the namespace: each one of a kernel process (the kernel, or a
    child such as ijavascript's node session) is on 127.0.0.1."""
    tree, _ = built_tree
    if "Stand-in" in (tree / "usr/lib/e2b-code-interpreter/server/main.py").read_text():
        pytest.skip(f"{tree}: built from the stand-in fixture, not upstream's server")
    if os.geteuid() != 0:
        pytest.skip("needs root (namespaces, chroot)")
    kernels = testimages.ci_kernels(tree)
    # One language per kernel (js for javascript; python, whose kernel the
    # server started already, gets a context of its own too).
    languages = ",".join(lang for lang in ["python", *testimages.ci_languages(kernels)] if lang != "ts")
    got = run_in_stack(tree, tmp_path, f"timeout 500 /usr/bin/python3 {HERE}/kernel_listeners.py {languages}",
                       "KERNEL-LISTENERS")
    assert set(got["contexts"]) == set(languages.split(","))
    kernel_pids = {s["pid"] for s in got["sockets"] if "kernel-" in s["cmdline"] and ".json" in s["cmdline"]}
    # Children of a kernel (ijavascript's session) count as the kernel.
    kernel_sockets = [s for s in got["sockets"] if s["pid"] in kernel_pids or s["ppid"] in kernel_pids]
    print(json.dumps(got["sockets"], indent=1))
    assert kernel_sockets, f"no kernel listens at all: {got['sockets']}"
    # A JVM bound to 127.0.0.1 shows as the IPv4-mapped ::ffff:127.0.0.1.
    off = [s for s in kernel_sockets if not s["address"].startswith(("127.0.0.1:", "::ffff:127.0.0.1:"))]
    assert not off, f"kernel sockets off loopback: {off}"
    # Each kernel (its connection file's kernel process) holds its five ports there.
    per_kernel = {pid: sum(1 for s in kernel_sockets if s["pid"] == pid) for pid in kernel_pids}
    assert len(per_kernel) >= len(kernels) and all(n >= 5 for n in per_kernel.values()), per_kernel


@pytest.mark.parametrize("asked", ["cobol", "python,r,cobol"])
def test_unknown_kernel_is_refused_before_the_build(tmp_path, asked):
    """kernels= with a name upstream's make_template does not know fails at
    once (no mkosi, no download), naming it and listing the valid ones, and
    writes nothing into out/."""
    out = tmp_path / "out"
    cp = run(["make", "-s", "-C", ROOT, "flavor=e2b-ci", f"kernels={asked}", f"out={out}", "image-preflight"],
             timeout=120)
    assert cp.returncode != 0, cp.stdout[-2000:]
    assert ("kernels=cobol: unknown kernel (valid: python, javascript, r, bash, java; "
            "python and javascript are always in)") in cp.stderr, cp.stderr[-2000:]
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
