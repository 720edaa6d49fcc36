"""Test helper: runs each case of a JSON file [{"name", "code"}] through the
e2b code interpreter's POST /execute on 127.0.0.1:49999 (the default python
context, as the SDK's run_code does; execute() also takes a context's id) and
prints one JSON object: for each name, its stdout, stderr, results and error,
as the server streamed them."""
import json
import sys
import urllib.request

URL = "http://127.0.0.1:49999/execute"


def execute(code, timeout=600, context_id=None):
    body = {"code": code, "context_id": context_id} if context_id else {"code": code}
    req = urllib.request.Request(URL, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    out = {"stdout": "", "stderr": "", "results": [], "error": None, "ended": False}
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        for line in resp:
            if not line.strip():
                continue
            msg = json.loads(line)
            kind = msg.get("type")
            if kind in ("stdout", "stderr"):
                out[kind] += msg.get("text", "")
            elif kind == "result":
                out["results"].append(msg)
            elif kind == "error":
                out["error"] = msg
            elif kind == "end_of_execution":
                out["ended"] = True
    return out


def main(path):
    with open(path, encoding="utf-8") as f:
        cases = json.load(f)
    report = {}
    for case in cases:
        try:
            report[case["name"]] = execute(case["code"])
        except OSError as e:
            report[case["name"]] = {"error": {"name": "client", "value": f"POST /execute: {e}"}}
    print("EXECUTE-REPORT " + json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
