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

# Builds or boots an image: make test runs it, make check does not.
pytestmark = pytest.mark.build

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
    """The table cannot claim a version the image does not have (a Debian
    package for pydeps=debian, a venv package for pydeps=pip), nor a pip
    version other than upstream's without a recorded deviation."""
    m = built.manifest
    reqs = built.tree / "usr/share/doc/e2b-code-interpreter/requirements.txt"
    if "python_packages" in m:
        m["python_packages"] = [p for p in m["python_packages"] if p["name"].lower() != "seaborn"]
        message = f"seaborn: seaborn is not in the venv of {tmp_path}"
    else:
        m["packages"] = [p for p in m["packages"] if p["name"] != "python3-seaborn"]
        message = "seaborn: python3-seaborn is not in the image's manifest"
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    cp = run(["/usr/bin/python3", STACK_TABLE, tmp_path, "--requirements", reqs])
    assert cp.returncode == 1
    assert message in cp.stderr
    if "python_packages" in m:
        for p in m["python_packages"]:
            if p["name"].lower() == "pandas":
                p["version"] = "2.2.2"
        (tmp_path / "manifest.json").write_text(json.dumps(m))
        cp = run(["/usr/bin/python3", STACK_TABLE, tmp_path, "--requirements", reqs])
        assert cp.returncode == 1
        assert "pandas: the venv has 2.2.2, upstream pins 2.2.3, and no deviation is recorded" in cp.stderr


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


# Upstream's packages that Debian lacks: they ship with pydeps=pip only. Every
# input is made here (no model, corpus or sound file is downloaded).
PIP_ONLY_CASES = {
    "spacy": """
        import json
        import spacy
        nlp = spacy.blank("en")
        doc = nlp("Hello, world! E2B's sandbox runs code.")
        print(json.dumps({"tokens": [t.text for t in doc], "lang": nlp.lang, "pipes": nlp.pipe_names}))
    """,
    "textblob": """
        import json
        from textblob import TextBlob
        # The PatternAnalyzer's lexicon ships inside textblob (no NLTK data).
        print(json.dumps({"good": TextBlob("good").sentiment.polarity,
                          "bad": TextBlob("bad").sentiment.polarity,
                          "upper": str(TextBlob("e2b").upper())}))
    """,
    "librosa": """
        import json
        import numpy as np
        import librosa
        sr = 22050
        t = np.arange(sr) / sr
        y = 0.5 * np.sin(2 * np.pi * 440.0 * t)
        f0 = librosa.yin(y, fmin=100, fmax=1000, sr=sr)
        print(json.dumps({"f0": float(np.median(f0)), "note": librosa.hz_to_note(float(np.median(f0))),
                          "duration": float(librosa.get_duration(y=y, sr=sr))}))
    """,
    "kaleido": """
        import json, subprocess, sys
        from importlib.metadata import version
        import plotly.graph_objects as go
        # The warning is given once per process: a fresh one (the kernel has
        # imported everything already).
        warn = subprocess.run([sys.executable, "-W", "always", "-c", "import plotly.io, kaleido"],
                              capture_output=True, text=True).stderr
        fig = go.Figure(go.Bar(x=["a", "b"], y=[3, 5]))
        try:
            png = fig.to_image(format="png", width=200, height=100)
            got = {"png": png[:8].hex()}
        except Exception as e:
            got = {"error": type(e).__name__, "message": str(e).strip().splitlines()[0]}
        got["versions"] = [version("plotly"), version("kaleido")]
        got["warned"] = "Please upgrade Plotly to version 6.1.1" in warn
        print(json.dumps(got))
    """,
    "bokeh": """
        import json
        from bokeh.embed import file_html, json_item
        from bokeh.plotting import figure
        from bokeh.resources import CDN
        p = figure(title="e2b bokeh")
        p.line([1, 2, 3], [4, 6, 5], name="series")
        html = file_html(p, CDN, "e2b doc")
        item = json_item(p)
        print(json.dumps({"doctype": html.lstrip().lower().startswith("<!doctype html>"),
                          "title": "<title>e2b doc</title>" in html,
                          "roots": len(item["doc"]["roots"]), "has_series": '"series"' in json.dumps(item)}))
    """,
    "gensim": """
        import json
        from gensim.corpora import Dictionary
        from gensim.models import Word2Vec
        texts = [["cat", "sat", "mat"], ["dog", "sat", "log"], ["cat", "dog", "sat"]]
        d = Dictionary(texts)
        model = Word2Vec(texts, vector_size=8, min_count=1, seed=1, workers=1, epochs=5)
        print(json.dumps({"ids": d.token2id, "bow": d.doc2bow(["sat", "sat", "dog"]),
                          "first": model.wv.index_to_key[0], "dims": int(model.wv["cat"].shape[0]),
                          "vocab": len(model.wv)}))
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
    cases += [{"name": k, "code": textwrap.dedent(v)} for k, v in PIP_ONLY_CASES.items() if k in mods]
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


def pip_only(executed, name):
    if name not in executed[0]:
        pytest.skip(f"{name} is not shipped by this build (Debian has no package; pydeps=pip ships it)")
    return printed(executed, name)


def test_spacy_blank_pipeline_tokenizes(executed):
    got = pip_only(executed, "spacy")
    assert got == {"tokens": ["Hello", ",", "world", "!", "E2B", "'s", "sandbox", "runs", "code", "."],
                   "lang": "en", "pipes": []}


def test_textblob_sentiment_from_its_own_lexicon(executed):
    got = pip_only(executed, "textblob")
    assert got["good"] == pytest.approx(0.7) and got["bad"] == pytest.approx(-0.7)
    assert got["upper"] == "E2B"


def test_librosa_finds_the_pitch_of_a_generated_tone(executed):
    got = pip_only(executed, "librosa")
    assert got["f0"] == pytest.approx(440.0, rel=0.01) and got["note"] == "A4"
    assert got["duration"] == pytest.approx(1.0)


def test_kaleido_plotly_to_png_fails_as_upstreams_does(executed):
    """Upstream pins plotly 6.0.1 with kaleido 1.3.0, which plotly 6.0.1 does
    not support: importing kaleido warns to upgrade plotly to 6.1.1, and
    plotly's PNG export says kaleido is missing. Our pip stack has upstream's
    exact versions, so it does the same (kaleido 1.x would also need a Chrome,
    which upstream's image does not install either); os-image/e2b-ci/README.md,
    "Python stack"."""
    got = pip_only(executed, "kaleido")
    assert got["versions"] == ["6.0.1", "1.3.0"] and got["warned"] is True
    assert got["error"] == "ValueError"
    assert got["message"] == 'Image export using the "kaleido" engine requires the kaleido package,'


def test_bokeh_html_document(executed):
    got = pip_only(executed, "bokeh")
    assert got == {"doctype": True, "title": True, "roots": 1, "has_series": True}


def test_gensim_dictionary_and_word2vec(executed):
    got = pip_only(executed, "gensim")
    assert got["ids"] == {"cat": 0, "mat": 1, "sat": 2, "dog": 3, "log": 4}
    assert got["bow"] == [[2, 2], [3, 1]]
    assert got["first"] == "sat" and got["dims"] == 8 and got["vocab"] == 5
