"""Test only: E2B's real Python SDK (tests/sdk/requirements.txt) in its
normal mode, not debug, against one restored clone's envd, reached through
`e2b-hostlink forward` as a pool's host reaches it (tests/boot/test_clone_snapshot.py).

Normal mode is what a pool's users run: the SDK sends the access token the
control plane gave it with every envd call, and envd refuses any other. The
control plane's answer (sandbox id, the template's envd version, access
token) is turned into a Sandbox here exactly as Sandbox.connect does it;
the envd URL is the SDK's own `sandbox_url` setting, since no E2B domain
resolves to this clone.

argv: ENVD_URL ENVD_VERSION TOKEN_FILE OTHER_TOKEN_FILE... ; prints one JSON object:
commands.run's result with TOKEN, and the status of an authenticated envd
call (GET /envs) with TOKEN and with each other token. E2B_CLONE_TOOLS (a
word list): each tool's `--version` through commands.run, as "tools"."""
import json
import os
import sys

import httpx
from packaging.version import Version

from e2b import Sandbox
from e2b.connection_config import ConnectionConfig


def status(url: str, token: str) -> int:
    return httpx.get(f"{url}/envs", headers={"X-Access-Token": token}, timeout=60).status_code


def main() -> None:
    url, envd_version, token_file, *others = sys.argv[1:]
    token = open(token_file).read().strip()
    out: dict = {}
    out["health"] = httpx.get(f"{url}/health", timeout=60).status_code
    # As Sandbox.connect builds it from the control plane's answer (e2b
    # 2.63.0, sandbox_sync/main.py), the SDK's own constructor and headers.
    headers = {"E2b-Sandbox-Id": "isb-clone", "E2b-Sandbox-Port": str(ConnectionConfig.envd_port),
               "X-Access-Token": token}
    sbx = Sandbox(sandbox_id="isb-clone", sandbox_domain=None, envd_version=Version(envd_version),
                  envd_access_token=token, traffic_access_token=None,
                  connection_config=ConnectionConfig(debug=False, sandbox_url=url, request_timeout=120,
                                                     extra_sandbox_headers=headers))
    assert not sbx.connection_config.debug
    try:
        r = sbx.commands.run("echo $((6 * 7)) $(id -un)", timeout=120)
        out["commands_run"] = {"stdout": r.stdout.strip(), "exit_code": r.exit_code}
    except Exception as e:  # noqa: BLE001 - reported, and failed by the test
        out["commands_run"] = {"error": f"{type(e).__name__}: {e}"}
    # E2B_CLONE_TOOLS: tools the image must have (e2b-base's), each run as the user would.
    tools = os.environ.get("E2B_CLONE_TOOLS", "").split()
    if tools:
        try:
            r = sbx.commands.run(" && ".join(f"{t} --version >/dev/null" for t in tools) + " && echo tools-ok",
                                 timeout=300)
            out["tools"] = {"stdout": r.stdout.strip(), "exit_code": r.exit_code}
        except Exception as e:  # noqa: BLE001 - reported, and failed by the test
            out["tools"] = {"error": f"{type(e).__name__}: {e}"}
    out["own_token_status"] = status(url, token)
    out["other_token_status"] = [status(url, open(f).read().strip()) for f in others]
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
