"""Test only: every case of tests/sdk with the real, unmodified `e2b` SDK
from PyPI (build/py-sdk), in debug mode (E2B_DEBUG=true: no API call, envd
at localhost:49983, get_host(port) = localhost:port), through e2b-hostlink
forward into the real envd. The twin of probe_e2b.mjs: the same cases, the
same observation keys, one line per case (CASE <name> <json>); the expected
values live in test_sdk_rt.py. Env: E2B_SDK_TOKEN (sha512 in MMDS),
E2B_SDK_USER_SERVER (user_server.sh, the user's server for get_host)."""
import hashlib
import os
import threading
import time
import urllib.parse

import httpx

from e2b import CommandExitException, FilesystemEventType, Sandbox, TimeoutException
from e2b.sandbox.commands.command_handle import PtySize
from sdk_session import ENVD, TOKEN, as_control_plane_gives, post_init, report

HOME = "/home/user"


def sha256(data) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else bytes(data)).hexdigest()


def pattern(n: int) -> bytes:
    """The same deterministic bytes test_sdk_rt.py computes: b[i] = (31*i + 7) % 251."""
    return bytes((31 * i + 7) % 251 for i in range(n)) if n < 4096 else (pattern(251) * (n // 251 + 1))[:n]


def until(check, seconds=10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.05)
    return False


state = {}
cases = {}


def case(fn):
    cases[fn.__name__] = fn
    return fn


@case
def debug_create():
    plain = state["plain"] = Sandbox.create()
    r = plain.commands.run("echo pre-init")
    return {"sandboxId": plain.sandbox_id, "host3000": plain.get_host(3000),
            "envdVersion": str(plain._envd_version), "stdout": r.stdout}


@case
def init_token():
    wrong = post_init({"accessToken": "not-the-token"})
    init = post_init({"accessToken": TOKEN, "envVars": {"SDK_INIT_VAR": "from-init"}, "defaultUser": "user"})
    state["version"] = init.headers.get("x-envd-version")
    sbx = state["sbx"] = as_control_plane_gives(state["version"])
    unauth = httpx.get(f"{ENVD}/envs").status_code
    envs = httpx.get(f"{ENVD}/envs", headers={"X-Access-Token": TOKEN})
    without_token = None
    try:
        state["plain"].commands.run("true")
    except Exception as e:  # noqa: BLE001 - the class is the observation
        without_token = type(e).__name__
    r = sbx.commands.run('echo "$SDK_INIT_VAR"; id -un')
    return {"wrongTokenStatus": wrong.status_code, "initStatus": init.status_code, "unauthStatus": unauth,
            "authStatus": envs.status_code,
            "envsVar": envs.json().get("SDK_INIT_VAR") if envs.status_code == 200 else None,
            "sdkWithoutToken": without_token, "stdout": r.stdout}


@case
def envd_version():
    return {"initHeader": state["version"], "sdkVersion": str(state["sbx"]._envd_version)}


@case
def commands_run():
    r = state["sbx"].commands.run("echo out; echo err >&2")
    return {"stdout": r.stdout, "stderr": r.stderr, "exitCode": r.exit_code}


@case
def commands_exit_error():
    try:
        state["sbx"].commands.run("echo partial; echo bad >&2; exit 3")
    except CommandExitException as e:
        return {"errorClass": "CommandExitException", "exitCode": e.exit_code, "stdout": e.stdout, "stderr": e.stderr}
    return {"errorClass": None}


@case
def commands_env_cwd():
    r = state["sbx"].commands.run('printf "%s|%s" "$SDK_VAR" "$PWD"', envs={"SDK_VAR": "v a l"}, cwd="/tmp")
    return {"stdout": r.stdout}


@case
def commands_users():
    sbx = state["sbx"]
    return {"root": sbx.commands.run("id -u; id -un", user="root").stdout,
            "user": sbx.commands.run("id -u; id -un", user="user").stdout}


@case
def commands_background():
    sbx = state["sbx"]
    h = sbx.commands.run("sleep 60", background=True)
    listed = any(p.pid == h.pid and "sleep 60" in " ".join(p.args) for p in sbx.commands.list())
    killed = sbx.commands.kill(h.pid)
    wait_error = None
    try:
        h.wait()
    except Exception as e:  # noqa: BLE001
        wait_error = type(e).__name__
    listed_after = any(p.pid == h.pid for p in sbx.commands.list())
    return {"listed": listed, "killed": killed, "listedAfter": listed_after, "waitError": wait_error}


@case
def commands_stdin():
    sbx = state["sbx"]
    h = sbx.commands.run("head -n 2", background=True, stdin=True)
    sbx.commands.send_stdin(h.pid, "one\n")
    sbx.commands.send_stdin(h.pid, "two\n")
    r = h.wait()
    return {"stdout": r.stdout, "exitCode": r.exit_code}


@case
def commands_stream_1mib():
    chunks = []
    r = state["sbx"].commands.run("yes 0123456789abcde | head -c 1048576", on_stdout=chunks.append)
    streamed = "".join(chunks)
    return {"streamedBytes": len(streamed), "streamedSha256": sha256(streamed), "resultBytes": len(r.stdout),
            "resultSha256": sha256(r.stdout), "chunks": len(chunks)}


@case
def commands_timeout():
    t0 = time.monotonic()
    try:
        state["sbx"].commands.run("sleep 30", timeout=1)
    except TimeoutException as e:
        return {"errorClass": type(e).__name__ if type(e) is not TimeoutException else "TimeoutException",
                "seconds": time.monotonic() - t0}
    return {"errorClass": None}


@case
def pty():
    sbx = state["sbx"]
    out = bytearray()
    h = sbx.pty.create(PtySize(rows=24, cols=80))
    result = {}

    def read():
        try:
            h.wait(on_pty=out.extend)
        except Exception as e:  # noqa: BLE001 - the end of a killed PTY is observed
            result["waitError"] = type(e).__name__
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    sbx.pty.send_stdin(h.pid, b"stty size; echo PTY-$((6*7))\n")
    until(lambda: b"PTY-42" in out)
    sbx.pty.resize(h.pid, PtySize(rows=30, cols=100))
    sbx.pty.send_stdin(h.pid, b"stty size\n")
    until(lambda: b"30 100" in out)
    killed = sbx.pty.kill(h.pid)
    reader.join(10)
    return {"output": out.decode(errors="replace"), "killed": killed, "waitError": result.get("waitError")}


@case
def files_text():
    sbx = state["sbx"]
    sbx.files.write(f"{HOME}/sdk/text.txt", "hello, ünïcödé\nline 2\n")
    return {"text": sbx.files.read(f"{HOME}/sdk/text.txt")}


@case
def files_bytes():
    sbx = state["sbx"]
    sbx.files.write(f"{HOME}/sdk/bytes.bin", bytes(range(256)))
    return {"hex": bytes(sbx.files.read(f"{HOME}/sdk/bytes.bin", format="bytes")).hex()}


def big_file(size, name):
    sbx = state["sbx"]
    data = pattern(size)
    path = f"{HOME}/sdk/{name}"
    sbx.files.write(path, data)
    back = sbx.files.read(path, format="bytes")
    guest = sbx.commands.run(f"sha256sum {path}")
    return {"writtenSha256": sha256(data), "readSha256": sha256(back), "guestSha256": guest.stdout.split(" ")[0],
            "size": sbx.files.get_info(path).size}


@case
def files_1mib():
    return big_file(1 << 20, "1mib.bin")


@case
def files_16mib():
    return big_file(16 << 20, "16mib.bin")


@case
def files_ops():
    f = state["sbx"].files
    d = f"{HOME}/sdk-ops"
    made, made_again = f.make_dir(d), f.make_dir(d)
    f.write(f"{d}/a.txt", "abc")
    f.make_dir(f"{d}/sub")
    listing = sorted([e.name, e.type.value] for e in f.list(d))
    info = f.get_info(f"{d}/a.txt")
    renamed = f.rename(f"{d}/a.txt", f"{d}/b.txt")
    exists_old, exists_new = f.exists(f"{d}/a.txt"), f.exists(f"{d}/b.txt")
    f.remove(d)
    return {"madeDir": made, "madeAgain": made_again, "list": listing,
            "info": {"name": info.name, "type": info.type.value, "size": info.size, "path": info.path,
                     "owner": info.owner},
            "renamed": renamed.path, "existsOld": exists_old, "existsNew": exists_new,
            "existsAfterRemove": f.exists(d)}


@case
def files_watch():
    sbx = state["sbx"]
    d = f"{HOME}/sdk-watch"
    sbx.files.make_dir(d)
    w = sbx.files.watch_dir(d)
    seen = []
    sbx.files.write(f"{d}/a.txt", "first")
    sbx.commands.run(f"echo more >> {d}/a.txt")
    sbx.files.remove(f"{d}/a.txt")

    def got_remove():
        seen.extend([ev.type.value, ev.name] for ev in w.get_new_events())
        return any(t == FilesystemEventType.REMOVE.value for t, _ in seen)
    until(got_remove)
    w.stop()
    return {"events": seen}


@case
def files_upload_download():
    sbx = state["sbx"]
    path = f"{HOME}/sdk-up.bin"
    data = pattern(300000)
    up = sbx.upload_url(path)
    up_status = httpx.post(up, files={"file": ("sdk-up.bin", data)}).status_code
    down = sbx.download_url(path)
    r = httpx.get(down)
    unsigned = httpx.get(down.split("?")[0] + "?path=" + urllib.parse.quote(path)).status_code
    return {"signed": "signature=" in up and "signature=" in down, "uploadStatus": up_status,
            "downloadStatus": r.status_code, "downloadedSha256": sha256(r.content), "sentSha256": sha256(data),
            "unsignedStatus": unsigned}


@case
def get_host():
    sbx = state["sbx"]
    sbx.files.write(f"{HOME}/srv/hello.txt", "served through the relay\n")
    with open(os.environ["E2B_SDK_USER_SERVER"]) as f:
        sbx.files.write(f"{HOME}/srv/serve.sh", f.read())
    server = sbx.commands.run("chmod +x serve.sh && exec socat TCP-LISTEN:3000,bind=127.0.0.1,reuseaddr,fork "
                              f"EXEC:{HOME}/srv/serve.sh", background=True, cwd=f"{HOME}/srv")
    host = sbx.get_host(3000)
    got = {}

    def fetch():
        try:
            r = httpx.get(f"http://{host}/hello.txt")
        except httpx.HTTPError:
            return False
        got.update(status=r.status_code, body=r.text)
        return r.status_code == 200
    until(fetch, 15)
    server.kill()
    return {"host": host, "status": got.get("status"), "body": got.get("body")}


report(cases)
