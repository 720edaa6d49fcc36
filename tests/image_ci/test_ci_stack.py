"""The Python stack of e2b-ci (issue 12), through the code interpreter's own
API: in the stack started from the session's e2b-ci build (tests/testimages.py),
every module we ship imports inside a kernel through POST /execute on
127.0.0.1:49999 (upstream's API server, then Jupyter, then the kernel), and a
small real workload per family gives its known answer. The README's stack
table must match the image.

Needs the image built from upstream's real archive: the test fixture
(tests/fixtures/code-interpreter) has no real API server and no
requirements.txt, so with it these tests skip, saying so.
"""
import base64
import json
import textwrap

import pytest

import testimages
from ci_helpers import FLAVOR_DIR, ROOT, e2b_ci_build, run

STACK_TABLE = FLAVOR_DIR / "stack-table.py"
README = FLAVOR_DIR / "README.md"


@pytest.fixture(scope="module")
def built():
    b = e2b_ci_build()
    pin = next(a for a in b.manifest["artifacts"] if a["name"] == "code-interpreter")
    if pin["version"] == testimages.FIXTURE_COMMIT:
        pytest.skip("e2b-ci was built from the test fixture (tests/fixtures/code-interpreter: no real "
                    "API server, no requirements.txt), not from upstream's archive")
    return b


def test_readme_stack_table_matches_the_image(built):
    cp = run(["/usr/bin/python3", STACK_TABLE, built.dir, "--check", README])
    assert cp.returncode == 0, cp.stderr[-6000:]


def test_stack_table_refuses_a_package_the_image_lacks(built, tmp_path):
    """The table cannot claim a version the image does not have."""
    m = built.manifest
    m["packages"] = [p for p in m["packages"] if p["name"] != "python3-seaborn"]
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    reqs = built.tree / "usr/share/doc/e2b-code-interpreter/requirements.txt"
    cp = run(["/usr/bin/python3", STACK_TABLE, tmp_path, "--requirements", reqs])
    assert cp.returncode == 1
    assert "seaborn: python3-seaborn is not in the image's manifest" in cp.stderr


def shipped_modules(built):
    cp = run(["/usr/bin/python3", STACK_TABLE, built.dir, "--modules"])
    assert cp.returncode == 0, cp.stderr
    return sorted({m for mods in json.loads(cp.stdout).values() for m in mods})


CASES = {
    "sklearn": """
        import json
        import numpy as np
        from sklearn.linear_model import LinearRegression
        from sklearn.tree import DecisionTreeClassifier
        X = np.arange(20, dtype=float).reshape(-1, 1)
        reg = LinearRegression().fit(X, 3 * X.ravel() + 2)
        clf = DecisionTreeClassifier(random_state=0).fit([[0, 0], [0, 1], [1, 0], [1, 1]], [0, 1, 1, 0])
        print(json.dumps({"predict": float(reg.predict([[10.0]])[0]), "coef": float(reg.coef_[0]),
                          "xor": clf.predict([[1, 1], [0, 1]]).tolist()}))
    """,
    "scipy": """
        import json, math
        from scipy import optimize
        res = optimize.minimize(lambda v: (v[0] - 3) ** 2 + (v[1] + 1) ** 2, [0.0, 0.0])
        root = optimize.brentq(lambda x: math.cos(x) - x, 0, 1)
        print(json.dumps({"min": res.x.tolist(), "root": root}))
    """,
    "sympy": """
        import json
        import sympy
        x = sympy.symbols("x")
        print(json.dumps({"roots": [int(r) for r in sympy.solve(x**2 - 5*x + 6, x)],
                          "diff": str(sympy.diff(sympy.sin(x) * x, x))}))
    """,
    "seaborn": """
        import matplotlib.pyplot as plt
        import seaborn as sns
        from matplotlib import font_manager
        print(font_manager.findfont("WenQuanYi Micro Hei", fallback_to_default=False))
        fig, ax = plt.subplots()
        sns.barplot(x=["a", "b", "c"], y=[1, 3, 2], errorbar=None, ax=ax)
        ax.set_title("销售 グラフ 차트")
        plt.show()
    """,
    "openpyxl": """
        import io, json
        import openpyxl
        wb = openpyxl.Workbook()
        ws = wb.active
        ws.title = "data"
        for row in [("name", "n"), ("a", 2), ("b", 40)]:
            ws.append(row)
        buf = io.BytesIO()
        wb.save(buf)
        back = openpyxl.load_workbook(io.BytesIO(buf.getvalue()))["data"]
        print(json.dumps({"rows": [list(r) for r in back.iter_rows(values_only=True)],
                          "total": sum(c.value for c in back["B"][1:])}))
    """,
    "bs4": """
        import json
        from bs4 import BeautifulSoup
        soup = BeautifulSoup('<ul><li><a href="/x">X</a></li><li><a href="/y">Y</a></li></ul><p>t</p>',
                             "html.parser")
        print(json.dumps({"links": [(a["href"], a.text) for a in soup.find_all("a")],
                          "p": soup.p.get_text()}))
    """,
    "opencv": """
        import json
        import cv2
        import numpy as np
        img = np.zeros((100, 100), np.uint8)
        cv2.rectangle(img, (20, 20), (39, 39), 255, thickness=-1)
        ok, png = cv2.imencode(".png", img)
        back = cv2.imdecode(png, cv2.IMREAD_GRAYSCALE)
        red = np.zeros((1, 1, 3), np.uint8)
        red[0, 0] = (0, 0, 255)
        print(json.dumps({"ok": bool(ok), "nonzero": int(cv2.countNonZero(back)),
                          "same": bool((back == img).all()),
                          "gray_of_red": int(cv2.cvtColor(red, cv2.COLOR_BGR2GRAY)[0, 0])}))
    """,
    "plotly": """
        import json
        import plotly.graph_objects as go
        fig = go.Figure(go.Bar(x=["a", "b"], y=[3, 5]), layout_title_text="t")
        spec = json.loads(fig.to_json())
        print(json.dumps({"type": spec["data"][0]["type"], "y": list(spec["data"][0]["y"]),
                          "title": spec["layout"]["title"]["text"]}))
    """,
    # Upstream's startup scripts (template/startup_scripts), loaded by the
    # kernel: a DataFrame comes back as e2b/data, PIL's save() displays.
    "startup-dataframe": """
        import pandas as pd
        pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    """,
    "startup-pil": """
        from PIL import Image
        Image.new("RGB", (4, 4), "red").save("/tmp/e2b-ci-red.png")
    """,
}


@pytest.fixture(scope="module")
def executed(built, tmp_path_factory):
    """The stack started from the built tree (chroot as uid 1000, private
    namespaces; tests/image_ci/stack.sh), every case run through POST /execute."""
    mods = shipped_modules(built)
    imports = textwrap.dedent(f"""
        import importlib, json
        failed = {{}}
        for name in {mods!r}:
            try:
                importlib.import_module(name)
            except Exception as e:
                failed[name] = f"{{type(e).__name__}}: {{e}}"
        print(json.dumps({{"modules": {len(mods)}, "failed": failed}}))
    """)
    cases = [{"name": "imports", "code": imports}]
    cases += [{"name": k, "code": textwrap.dedent(v)} for k, v in CASES.items()]
    path = tmp_path_factory.mktemp("ci-stack") / "cases.json"
    path.write_text(json.dumps(cases))
    cp = run(["unshare", "--net", "--mount", "--pid", "--fork", "--mount-proc",
              ROOT / "tests/image_ci/exec_stack.sh", built.tree, path], timeout=1800)
    assert cp.returncode == 0 and "EXECUTE-REPORT " in cp.stdout, cp.stdout[-4000:] + cp.stderr[-4000:]
    return json.loads(cp.stdout.split("EXECUTE-REPORT ", 1)[1].splitlines()[0]), len(mods)


def answer(executed, name):
    out = executed[0][name]
    assert out["error"] is None, f"{name}: {out['error']}"
    assert out["ended"], f"{name}: no end_of_execution"
    return out


def printed(executed, name):
    return json.loads(answer(executed, name)["stdout"].strip().splitlines()[-1])


def test_every_shipped_module_imports_in_a_kernel(executed):
    got = printed(executed, "imports")
    assert got["modules"] == executed[1] and got["modules"] >= 40
    assert got["failed"] == {}


def test_sklearn_fit_predict(executed):
    got = printed(executed, "sklearn")
    assert got["predict"] == pytest.approx(32.0) and got["coef"] == pytest.approx(3.0)
    assert got["xor"] == [0, 1]


def test_scipy_optimize(executed):
    got = printed(executed, "scipy")
    assert got["min"] == pytest.approx([3.0, -1.0], abs=1e-4)
    assert got["root"] == pytest.approx(0.7390851332, abs=1e-9)


def test_sympy_solve(executed):
    got = printed(executed, "sympy")
    assert sorted(got["roots"]) == [2, 3]
    assert got["diff"] == "x*cos(x) + sin(x)"


def test_seaborn_plot_comes_back_as_png_with_the_chart_and_cjk_glyphs(executed):
    out = answer(executed, "seaborn")
    assert out["stdout"].strip().endswith("wqy-microhei.ttc"), out["stdout"]
    # matplotlib warns "Glyph … missing from font(s)" when no font has a glyph.
    assert "missing from" not in out["stderr"], out["stderr"][-2000:]
    [res] = [r for r in out["results"] if r.get("png")]
    assert base64.b64decode(res["png"])[:8] == b"\x89PNG\r\n\x1a\n"
    chart = res["chart"]
    assert chart["type"] == "bar" and chart["title"] == "销售 グラフ 차트"
    assert [(e["label"], e["value"]) for e in chart["elements"]] == [("a", 1), ("b", 3), ("c", 2)]


def test_openpyxl_write_read(executed):
    got = printed(executed, "openpyxl")
    assert got["rows"] == [["name", "n"], ["a", 2], ["b", 40]] and got["total"] == 42


def test_bs4_parse(executed):
    got = printed(executed, "bs4")
    assert got["links"] == [["/x", "X"], ["/y", "Y"]] and got["p"] == "t"


def test_opencv_on_an_in_memory_image(executed):
    got = printed(executed, "opencv")
    assert got == {"ok": True, "nonzero": 400, "same": True, "gray_of_red": 76}


def test_plotly_figure_to_json(executed):
    got = printed(executed, "plotly")
    assert got == {"type": "bar", "y": [3, 5], "title": "t"}


def test_startup_scripts_dataframe_and_pil_display(executed):
    [df] = answer(executed, "startup-dataframe")["results"]
    assert df["data"] == {"a": [1, 2], "b": ["x", "y"]}
    pil = answer(executed, "startup-pil")["results"]
    assert any(base64.b64decode(r.get("png") or "")[:4] == b"\x89PNG" for r in pil), pil
