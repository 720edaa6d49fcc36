"""Test only: what every Python probe of tests/sdk shares (probe_e2b.py,
probe_git.py): /init with the pool's token, the sandbox object the control
plane would give the SDK, and the CASE report loop.
Env: E2B_SDK_TOKEN (its sha512 is MMDS's accessTokenHash)."""
import json
import os
import traceback

import httpx
from packaging.version import Version

from e2b import Sandbox
from e2b.connection_config import ConnectionConfig

ENVD = "http://localhost:49983"
TOKEN = os.environ["E2B_SDK_TOKEN"]


def post_init(body: dict) -> httpx.Response:
    return httpx.post(f"{ENVD}/init", json=body)


def as_control_plane_gives(envd_version: str) -> Sandbox:
    """In debug mode Sandbox.create() has no access token and the version
    ENVD_DEBUG_FALLBACK: both normally come from the control plane's answer,
    which debug mode skips. This builds the sandbox exactly as
    Sandbox._cls_create does from that answer (the SDK's own constructor and
    headers, unmodified), with the token the pool gave /init and the version
    envd itself announced."""
    headers = {"X-Access-Token": TOKEN, "E2b-Sandbox-Id": "debug_sandbox_id",
               "E2b-Sandbox-Port": str(ConnectionConfig.envd_port)}
    return Sandbox(sandbox_id="debug_sandbox_id", sandbox_domain=None, envd_version=Version(envd_version),
                   envd_access_token=TOKEN, traffic_access_token=None,
                   connection_config=ConnectionConfig(debug=True, extra_sandbox_headers=headers))


# A probe's cases, in the order defined (@case), for report().
cases: dict = {}


def case(fn):
    cases[fn.__name__] = fn
    return fn


def report(cases: dict) -> None:
    """Runs CASES in order, one line each: CASE <name> <json observation>. A
    case that raises reports {"error": ...}, which fails its test."""
    for name, run in cases.items():
        try:
            obs = run()
        except Exception:  # noqa: BLE001 - reported, and failed by the test
            obs = {"error": traceback.format_exc()}
        print(f"CASE {name} {json.dumps(obs)}", flush=True)
