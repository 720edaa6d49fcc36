"""Test only: the e2b-ci cases with the real, unmodified e2b-code-interpreter
SDK from PyPI (build/py-sdk) in debug mode, through e2b-hostlink forward.
The twin of probe_ci.mjs: same cases, same keys (CASE <name> <json>);
expectations in test_sdk_ci.py."""
import base64
import json
import traceback

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


def ci_contexts():
    sbx = state["sbx"]
    ctx = sbx.create_code_context()
    sbx.run_code("x = 41", context=ctx)
    in_ctx = sbx.run_code("x + 1", context=ctx)
    outside = sbx.run_code("x")
    listed = any(c.id == ctx.id for c in sbx.list_code_contexts())
    return {"language": ctx.language, "text": in_ctx.text,
            "outsideError": outside.error.name if outside.error else None, "listed": listed}


for fn in (ci_run_code, ci_chart, ci_error, ci_contexts):
    try:
        obs = fn()
    except Exception:  # noqa: BLE001 - reported, and failed by test_sdk_ci.py
        obs = {"error": traceback.format_exc()}
    print(f"CASE {fn.__name__} {json.dumps(obs)}", flush=True)
