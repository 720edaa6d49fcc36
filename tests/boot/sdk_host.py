"""E2B's real SDKs against a booted guest, from the host (test only).

The SDKs in debug mode talk to localhost:49983 (envd), :49999 (runCode) and
:3000 (getHost(3000)). A pool's host serves those with `e2b-hostlink forward`
over vsock; ours has no host-to-guest vsock transport, so the path is split
where it must be and kept real everywhere else:

  SDK (host netns) -> socat 127.0.0.1:P -> TCP to the guest's eth0, port
  FORWARDS[P] (a test port, unguarded) -> e2b-hostlink --cid 1 forward in
  the guest (started by the probe, guest/probe.sh section_sdk_forwards) ->
  vsock_loopback -> the image's relays (vsock-proxy@49983/@49999 and the
  dynamic relay for 3000) -> envd, the code interpreter, the user's server.

Only the socat hop and the guest-side e2b-hostlink stand in for the VMM's
vsock transport. The probes and their expectations are tests/sdk's, the same
for this boot as for the namespace layer.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import secrets
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
SDK_DIR = HERE.parent / "sdk"
sys.path.insert(0, str(SDK_DIR))
sys.path.insert(0, str(HERE.parent))

import testimages  # noqa: E402

# Local port (what the SDK dials) -> the guest's test port its forward listens on.
FORWARDS = {49983: 15983, 49999: 15999, 3000: 13000}
# The guest's test port that returns envd to a clone's state without an access
# token (guest/sdk-reset.sh): each probe starts from there, as in the namespace
# layer, where each has an envd of its own.
RESET_PORT = 15900
# Each starts from a clone without an access token (reset_guest). The code
# interpreter's never set one (the server passes the caller's token to envd's
# /envs, and the SDKs in debug mode have none); the e2b and git probes /init one.
# LANGUAGES: the SDK languages beside python that the image's kernels serve;
# the ci probes run BOOT_LANGUAGE_CASES of them (one known answer per
# language; every case of each runs in the namespace layer, tests/sdk).
PROBES = {  # name -> (the probe's command, whether it runs from the npm prefix)
    "js-ci": (["node", "probe_ci.mjs", "LANGUAGES", "BOOT_CASES"], True),
    "py-ci": (["PYSDK", str(SDK_DIR / "probe_ci.py"), "LANGUAGES", "BOOT_CASES"], False),
    "js": (["node", "probe_e2b.mjs"], True),
    "py": (["PYSDK", str(SDK_DIR / "probe_e2b.py")], False),
    "js-git": (["node", "probe_git.mjs"], True),
    "py-git": (["PYSDK", str(SDK_DIR / "probe_git.py")], False),
}
# Only where a boot asks for them (Variant.sdk_probes): an E2B template's (test_template_boot.py).
OWN_PROBES = {"py-template": (["PYSDK", str(SDK_DIR / "probe_template.py")], False)}
BOOT_LANGUAGE_CASES = ("ci_js_default_context", "ci_js_answer", "ci_ts_answer", "ci_r_answer", "ci_bash_answer",
                       "ci_java_answer")
PROBE_TIMEOUT = 1200  # s, per probe, under TCG (a JVM's start under TCG takes minutes)


def image_languages(rootfs: pathlib.Path) -> list:
    """The SDK languages beside python that the image's kernels serve: its
    manifest's kernels (beside rootfs.ext4, as `make image` writes them), or
    every one, as in the default build, when no manifest is there."""
    manifest = rootfs.parent / "manifest.json"
    kernels = json.loads(manifest.read_text()).get("kernels", []) if manifest.exists() else list(testimages.CI_KERNELS)
    return testimages.ci_languages(kernels)


def new_token() -> tuple[str, str]:
    """A per-boot access token and the document's accessTokenHash for it."""
    token = secrets.token_hex(24)
    return token, hashlib.sha512(token.encode()).hexdigest()


def _listening(exec_argv, port: int) -> bool:
    cp = subprocess.run(exec_argv(["ss", "-Hltn", f"sport = :{port}"]), capture_output=True, text=True)
    return bool(cp.stdout.strip())


RESET = r"""
import socket, sys
with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60) as s:
    data = b""
    while chunk := s.recv(4096):
        data += chunk
print(data.decode(errors="replace").strip())
"""


def reset_guest(exec_argv, guest_addr: str) -> str:
    cp = subprocess.run(exec_argv(["/usr/bin/python3", "-c", RESET, guest_addr, str(RESET_PORT)]),
                        capture_output=True, text=True, timeout=90)
    return (cp.stdout + cp.stderr).strip()


def run_probes(exec_argv, guest_addr: str, doc: dict, token: str, languages: list, only: tuple = (),
               extra_env: dict | None = None) -> dict:
    """Runs every probe (ONLY's, when given) in the host netns (EXEC_ARGV wraps a command into it), with EXTRA_ENV;
    returns {probe: {"cases": {name: observation}, "rc": int, "tail": str,
    "languages": LANGUAGES}}."""
    import sdk_helpers  # installs the pinned SDKs on first use (build/)
    npm_dir, python = sdk_helpers.npm_sdk(), sdk_helpers.py_sdk()
    relays = [subprocess.Popen(exec_argv(["socat", f"TCP-LISTEN:{local},bind=127.0.0.1,fork,reuseaddr",
                                          f"TCP:{guest_addr}:{guest}"]),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for local, guest in FORWARDS.items()]
    out: dict = {}
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(_listening(exec_argv, p) for p in FORWARDS):
            time.sleep(0.1)
        env = dict(os.environ, E2B_DEBUG="true", E2B_SDK_TOKEN=token, E2B_SDK_INSTANCE_ID=doc["instanceID"],
                   E2B_SDK_ENV_ID=doc["envID"], E2B_SDK_USER_SERVER=str(SDK_DIR / "user_server.sh"), **(extra_env or {}))
        for name, (argv, from_npm) in ({n: {**PROBES, **OWN_PROBES}[n] for n in only} if only else PROBES).items():
            fill = {"PYSDK": str(python), "LANGUAGES": ",".join(languages), "BOOT_CASES": ",".join(BOOT_LANGUAGE_CASES)}
            argv = [fill.get(a, a) for a in argv]
            reset = reset_guest(exec_argv, guest_addr)
            text, rc = sdk_helpers.run_captured(exec_argv(argv), PROBE_TIMEOUT, env=env,
                                                cwd=npm_dir if from_npm else None)
            out[name] = {"cases": sdk_helpers.case_lines(text), "rc": rc, "tail": text[-4000:], "reset": reset,
                         "languages": list(languages)}
    finally:
        for p in relays:
            p.terminate()
            p.wait(timeout=10)
    return out
