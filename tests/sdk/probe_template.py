"""Test only: a booted E2B template (examples/templates/e2b-sdk, built from
the JSON the real SDK wrote; tests/boot/test_template_boot.py) driven by the
real `e2b` SDK from PyPI in debug mode, as a pool's clone of it is:

  template_init   /init with the pool's token and the defaults the pool's
                  restore gives it (E2B_SDK_DEFAULT_USER/_WORKDIR, from the
                  image's labels: the steps' last USER and WORKDIR); a
                  command then runs as that user in that workdir, and the
                  template's ENV is not in it (E2B gives ENVs to the start
                  and ready commands only)
  template_host   the start command's server at get_host(3000), through the
                  dynamic relay

One line per case (CASE <name> <json>), as the other probes; judged in
test_template_boot.py."""
import os
import time

import httpx

from sdk_session import TOKEN, as_control_plane_gives, case, cases, post_init, report

state = {}


@case
def template_init():
    init = post_init({"accessToken": TOKEN, "defaultUser": os.environ["E2B_SDK_DEFAULT_USER"],
                      "defaultWorkdir": os.environ["E2B_SDK_DEFAULT_WORKDIR"]})
    sbx = state["sbx"] = as_control_plane_gives(init.headers.get("x-envd-version"))
    r = sbx.commands.run('id -un; pwd; echo "GREETING=${GREETING:-}"')
    return {"initStatus": init.status_code, "stdout": r.stdout}


@case
def template_host():
    host = state["sbx"].get_host(3000)
    got = {}
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            r = httpx.get(f"http://{host}/", timeout=10)
            got = {"status": r.status_code, "body": r.text}
            break
        except httpx.HTTPError as e:
            got = {"error": f"{type(e).__name__}: {e}"}
            time.sleep(0.5)
    return {"host": host, **got}


report(cases)
