"""Test only: the e2b-ci cases with the real, unmodified e2b-code-interpreter
SDK from PyPI (build/py-sdk) in debug mode, through e2b-hostlink forward.
The twin of probe_ci.mjs: same cases, same keys (CASE <name> <json>);
expectations in test_sdk_ci.py."""
import base64
import contextlib
import json
import os
import pathlib
import sys
import traceback

from e2b import CommandExitException, TimeoutException
from e2b_code_interpreter import Sandbox

CHART = ('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9], label="squares")\n'
         'plt.title("sdk chart")\nplt.show()')
state = {}


def ci_run_code():
    sbx = state["sbx"] = Sandbox.create()
    ex = sbx.run_code("1+1")
    return {"text": ex.text, "executionError": ex.error.name if ex.error else None}


def ci_chart():
    ex = state["sbx"].run_code(CHART)
    r = ex.results[0] if ex.results else None
    chart = r.chart.to_dict() if r is not None and r.chart is not None else {}
    return {"results": len(ex.results),
            "pngMagic": base64.b64decode(r.png)[:8].hex() if r is not None and r.png else None,
            "chartType": chart.get("type"), "chartTitle": chart.get("title"),
            "elements": [{"label": e.get("label"), "points": e.get("points")} for e in chart.get("elements", [])],
            "executionError": f"{ex.error.name}: {ex.error.value}" if ex.error else None}


def ci_error():
    ex = state["sbx"].run_code('raise ValueError("sdk boom")')
    e = ex.error
    return {"name": e.name if e else None, "value": e.value if e else None,
            "hasTraceback": bool(e and "ValueError" in e.traceback)}


@contextlib.contextmanager
def code_context(**opts):
    """A context for one case, removed at its end (remove_code_context stops
    its kernel): a guest of 1 GiB holds the default contexts and a few
    kernels more, not one per case (the e2b-ci boot runs this probe and
    probe_ci.mjs against one guest)."""
    ctx = state["sbx"].create_code_context(**opts)
    try:
        yield ctx
    finally:
        state["sbx"].remove_code_context(ctx)


def ci_contexts():
    sbx = state["sbx"]
    with code_context() as ctx:
        sbx.run_code("x = 41", context=ctx)
        in_ctx = sbx.run_code("x + 1", context=ctx)
        outside = sbx.run_code("x")
        listed = any(c.id == ctx.id for c in sbx.list_code_contexts())
    return {"language": ctx.language, "text": in_ctx.text,
            "outsideError": outside.error.name if outside.error else None, "listed": listed,
            "listedAfterRemove": any(c.id == ctx.id for c in sbx.list_code_contexts())}


def ci_streams():
    out, err = [], []
    ex = state["sbx"].run_code('import sys\nprint("out-line")\nprint("err-line", file=sys.stderr)',
                               on_stdout=lambda m: out.append(m.line), on_stderr=lambda m: err.append(m.line))
    return {"stdout": ex.logs.stdout, "stderr": ex.logs.stderr, "onStdout": out, "onStderr": err}


def ci_env():
    sbx = state["sbx"]
    given = sbx.run_code('import os\nos.environ.get("E2B_CI_PROBE")', envs={"E2B_CI_PROBE": "from-sdk"})
    after = sbx.run_code('import os\nos.environ.get("E2B_CI_PROBE", "unset")')
    return {"given": given.text, "after": after.text}


def ci_dataframe():
    ex = state["sbx"].run_code('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})')
    html = ex.results[0].html if ex.results else ""
    return {"results": len(ex.results), "table": "<table" in (html or ""),
            "cells": [c for c in ("<th>a</th>", "<th>b</th>", "<td>x</td>", "<td>y</td>") if c in (html or "")]}


def ci_restart():
    sbx = state["sbx"]
    with code_context() as ctx:
        before = sbx.run_code("y = 7\ny", context=ctx)
        sbx.restart_code_context(ctx)
        after = sbx.run_code("y", context=ctx)
    return {"before": before.text, "afterError": after.error.name if after.error else None}


def ci_timeout():
    sbx = state["sbx"]
    with code_context() as ctx:
        try:
            sbx.run_code("import time\ntime.sleep(120)", context=ctx, timeout=3)
            return {"timedOut": False}
        except TimeoutException:
            return {"timedOut": True}


def ci_timeout_recovers():
    """A run cut off by its timeout leaves its context usable: the next run
    answers at once (bounded by 20 s, so that a regression fails here
    instead of waiting out the SDK's default timeout), and the cut-off run's
    envs are gone."""
    sbx = state["sbx"]
    with code_context() as ctx:
        try:
            sbx.run_code("import time\ntime.sleep(30)", context=ctx, timeout=2, envs={"E2B_CI_CUT_OFF": "set"})
            timed_out = False
        except TimeoutException:
            timed_out = True

        def observe(code):
            try:
                ex = sbx.run_code(code, context=ctx, timeout=20)
                return {"text": ex.text, "error": ex.error.name if ex.error else None}
            except TimeoutException:
                return {"text": None, "error": "TimeoutError"}

        nxt = observe("2+2")
        third = observe('import os\nos.environ.get("E2B_CI_CUT_OFF", "unset")')
        return {"timedOut": timed_out, "next": nxt, "third": third}


# Installs as E2B's docs tell users to add packages to the code interpreter,
# each seen by the next cell. Only with a package index (E2B_SDK_INDEX_URL:
# sdk_stack.sh serves tests/sdk/package_index.py on the guest's loopback); a
# boot's guest reaches none. The packages' names say which SDK installed them
# (probe_ci.mjs installs its own), the observations do not.
INDEX = os.environ.get("E2B_SDK_INDEX_URL")


def install_then_import(install, word: str) -> dict:
    """INSTALL(name) installs package e2b-probe-py<word>; then a cell of the
    default context imports it."""
    name = f"e2b-probe-py{word}"
    installed = install(name)
    ex = state["sbx"].run_code(f"import {name.replace('-', '_')} as m\nprint(m.NAME)")
    return {"install": installed, "imported": ex.logs.stdout == [name + "\n"],
            "importError": f"{ex.error.name}: {ex.error.value}" if ex.error else None}


def command(cmd: str) -> int:
    """CMD as `user` (E2B's default user; this probe does no /init that
    would name it), through envd (bash -l, as commands.run runs it): its
    exit code."""
    try:
        return state["sbx"].commands.run(cmd, user="user", timeout=300).exit_code
    except CommandExitException as e:
        return e.exit_code


def ci_install_path():
    """python3, pip and pip3 on the user's PATH are the kernel's Python;
    node, npm and the compiler are there too."""
    sbx = state["sbx"]
    kernel = sbx.run_code("import sys\nprint(sys.prefix)").logs.stdout
    shell = sbx.commands.run("python3 -c 'import sys; print(sys.prefix)'", user="user").stdout
    pips = {p: sbx.commands.run(f"{p} --version", user="user").stdout for p in ("pip", "pip3")}
    tools = {t: command(f"{t} --version >/dev/null") for t in ("node", "npm", "gcc", "make")}
    prefix = kernel[0].strip() if kernel else None
    return {"samePython": shell.strip() == prefix,
            "pipsOfKernel": {p: f"{prefix}/lib/python3" in v for p, v in pips.items()},
            "tools": tools}


def ci_install_pip_user():
    return install_then_import(lambda n: command(f"pip install --index-url {INDEX}/simple {n}"), "user")


def ci_install_pip_sudo():
    return install_then_import(lambda n: command(f"sudo pip install --index-url {INDEX}/simple {n}"), "sudo")


def in_cell(code: str) -> int:
    """CODE (a pip line) in a cell of the default context: 0 when pip said it installed."""
    ex = state["sbx"].run_code(code, timeout=300)
    return 0 if any("Successfully installed" in line for line in ex.logs.stdout) else 1


def ci_install_pip_bang():
    return install_then_import(lambda n: in_cell(f"!pip install --index-url {INDEX}/simple {n}"), "bang")


def ci_install_pip_magic():
    return install_then_import(lambda n: in_cell(f"%pip install --index-url {INDEX}/simple {n}"), "magic")


def ci_install_npm_require():
    """npm install in /home/user, then the javascript kernel's require() finds it."""
    name = "e2b-probe-pynpm"
    installed = command(f"cd /home/user && npm install --registry {INDEX}/npm/ {name}")
    ex = state["sbx"].run_code(f"console.log(require('{name}').name)", language="js")
    return {"install": installed, "imported": ex.logs.stdout == [name + "\n"],
            "importError": f"{ex.error.name}: {ex.error.value}" if ex.error else None}


INSTALL_CASES = (ci_install_path, ci_install_pip_user, ci_install_pip_sudo, ci_install_pip_bang,
                 ci_install_pip_magic, ci_install_npm_require) if INDEX else ()


# The per-language cases (ci_languages.json) for the languages the image's
# kernels serve (argv[1], a comma list; js and ts share javascript's kernel);
# argv[2], when given: only these of them (the boot's short list).
TABLE = json.loads((pathlib.Path(__file__).resolve().parent / "ci_languages.json").read_text())
SERVED = set(filter(None, (sys.argv[1] if len(sys.argv) > 1 else "").split(",")))
ONLY = set(filter(None, (sys.argv[2] if len(sys.argv) > 2 else "").split(",")))


def language_step(step, timeout, **opts):
    out, err = [], []
    try:
        ex = state["sbx"].run_code(step["code"], timeout=timeout, request_timeout=timeout, **opts,
                                   on_stdout=lambda m: out.append(m.line), on_stderr=lambda m: err.append(m.line))
    except TimeoutException:
        return {"thrown": "TimeoutError"}
    png = next((r.png for r in ex.results if r.png), None)
    e = ex.error
    return {"text": ex.text, "stdout": ex.logs.stdout, "stderr": ex.logs.stderr, "onStdout": out, "onStderr": err,
            "texts": [r.text for r in ex.results], "formats": [sorted(f for f in r.formats() if f != "text") for r in ex.results],
            "pngMagic": base64.b64decode(png)[:8].hex() if png else None,
            "error": {"name": e.name, "value": e.value,
                      "tracebackHasMarker": step["marker"] in (e.traceback or "") if "marker" in step else None}
            if e else None}


def language_case(case):
    def run():
        step_timeout = case.get("stepTimeoutSec", TABLE["stepTimeoutSec"])

        def run_steps(**opts):
            return [language_step(step, case["timeoutSec"] if case["kind"] == "timeout" and i == 0 else step_timeout,
                                  **opts) for i, step in enumerate(case["steps"])]
        if case["kind"] == "run":
            return {"contextLanguage": None, "steps": run_steps(language=case["language"])}
        with code_context(language=case["language"], request_timeout=TABLE["createTimeoutSec"]) as ctx:
            return {"contextLanguage": ctx.language, "steps": run_steps(context=ctx)}
    run.__name__ = case["name"]
    return run


for fn in (ci_run_code, ci_chart, ci_error, ci_contexts, ci_streams, ci_env, ci_dataframe, ci_restart,
           ci_timeout, ci_timeout_recovers, *INSTALL_CASES,
           *(language_case(c) for c in TABLE["cases"] if c["language"] in SERVED and (not ONLY or c["name"] in ONLY))):
    try:
        obs = fn()
    except Exception:  # noqa: BLE001 - reported, and failed by test_sdk_ci.py
        obs = {"error": traceback.format_exc()}
    print(f"CASE {fn.__name__} {json.dumps(obs)}", flush=True)
