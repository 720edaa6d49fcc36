"""Test helper for test_ci_server.py: the kernel's side of an interrupted run
(os-image/e2b-ci/PATCHES 0008), through the API server on 127.0.0.1:49999 and
Jupyter's own API on 127.0.0.1:8888. Runs inside the stack's namespace with
the e2b-ci tree's python (its websockets), beside execute_client.py.

- aborted: a cell that another Jupyter client runs fails after 2 s; ipykernel
  (stop_on_error) then aborts the API server's request queued behind it and
  answers it "aborted". The server must end that request with
  ExecutionAborted instead of leaving it open; the context keeps working.
- idle interrupt: an interrupt that reaches an idle kernel does not reach the
  next run.

Prints one line: KERNEL-CASES <json>."""
import json
import sys
import threading
import time
import urllib.request
import uuid

from websockets.sync.client import connect

from execute_client import execute

JUPYTER = "127.0.0.1:8888"
# A run that should answer at once gets this long before it counts as hung.
BOUND = 20


def post(url, body=None):
    req = urllib.request.Request(url, data=json.dumps(body or {}).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=BOUND) as resp:
        return resp.status, resp.read()


def observe(code, context_id):
    """What a run of CODE in the context came back with, or how it failed.
    The server writes a keepalive every 5 s, so a socket time-out never ends
    a hung run: the run gets BOUND seconds in all."""
    got = {}

    def run():
        try:
            got["out"] = execute(code, context_id=context_id, timeout=BOUND)
        except OSError as e:
            got["failed"] = f"client: {type(e).__name__}"
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(BOUND)
    if "out" not in got:
        return {"text": None, "error": got.get("failed", f"no end within {BOUND} s"), "ended": False}
    out = got["out"]
    text = next((r.get("text") for r in out["results"] if r.get("is_main_result")), None)
    return {"text": text, "error": out["error"]["name"] if out["error"] else None, "ended": out["ended"]}


def other_client_cell(kernel_id, code, started):
    """CODE sent to the kernel as another Jupyter client would (its own
    session, stop_on_error as every frontend sends it); STARTED is set once
    the kernel runs it, and this returns once the kernel is idle again."""
    msg_id = uuid.uuid4().hex
    with connect(f"ws://{JUPYTER}/api/kernels/{kernel_id}/channels", open_timeout=BOUND) as ws:
        ws.send(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            msg = json.loads(ws.recv(timeout=BOUND))
            if msg.get("parent_header", {}).get("msg_id") != msg_id or msg["msg_type"] != "status":
                continue
            state = msg["content"]["execution_state"]
            if state == "busy":
                started.set()
            elif state == "idle":
                return


def main():
    status, body = post("http://127.0.0.1:49999/contexts", {"language": "python"})
    context_id = json.loads(body)["id"]
    report = {}

    started = threading.Event()
    other = threading.Thread(target=other_client_cell, daemon=True,
                             args=(context_id, "import time\ntime.sleep(2)\nraise RuntimeError('other client')",
                                   started))
    other.start()
    started.wait(BOUND)
    report["queued_behind_failing_cell"] = observe("2+2", context_id)
    other.join(BOUND)
    report["after_abort"] = observe("2+2", context_id)

    status, _ = post(f"http://{JUPYTER}/api/kernels/{context_id}/interrupt")
    report["idle_interrupt_status"] = status
    time.sleep(1)
    report["after_idle_interrupt"] = observe("2+2", context_id)
    print("KERNEL-CASES " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
