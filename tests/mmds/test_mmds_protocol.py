"""mmds-serve's guest protocol, status case by status case, with real curl
in a network namespace that has 169.254.169.254/32 on its lo. Every test
runs against the release build and the ASan+UBSan build."""
import hashlib
import json
import os
import pathlib
import signal
import socket
import stat
import subprocess
import time

import pytest

from mmds_fixtures import curl, mmds, netns  # noqa: F401  (fixtures)
from mmds_helpers import http_raw, read_response

DOC = {
    "instanceID": "sbx-1234",
    "envID": "tmpl-abcd",
    "address": "http://logs.example:8080",
    "accessTokenHash": hashlib.sha512(b"secret-token").hexdigest(),
    "latest": {"meta-data": {"ami-id": "ami-12345678", "reservation-id": "r-1"}},
    "num": 43,
    "flag": True,
    "nothing": None,
    "list": ["a", "b"],
    "a/b": {"c~d": "escaped"},
}


def test_token_and_get_json(mmds, curl):
    mmds(document=DOC)
    r = curl("/latest/api/token", "-H", "X-metadata-token-ttl-seconds: 60", method="PUT")
    assert r.status == 200 and r.headers["content-type"] == "text/plain"
    assert r.headers["x-metadata-token-ttl-seconds"] == "60"  # echoed
    token = r.body
    assert len(token) >= 32
    r = curl("/", token=token, json_accept=True)
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    assert json.loads(r.body) == DOC
    assert " " not in r.body and "\n" not in r.body  # compact
    assert r.body == json.dumps(DOC, sort_keys=True, separators=(",", ":"))


def test_aws_header_names_any_case(mmds, curl):
    mmds(document=DOC)
    r = curl("/latest/api/token", "-H", "x-AWS-ec2-METADATA-token-ttl-seconds: 21600", method="PUT")
    assert r.status == 200
    assert r.headers["x-aws-ec2-metadata-token-ttl-seconds"] == "21600"
    r = curl("/instanceID", "-H", f"x-aws-EC2-metadata-TOKEN: {r.body}")
    assert (r.status, r.body) == (200, "sbx-1234")


def test_imds_text(mmds, curl):
    mmds(document=DOC)
    t = curl.token()
    r = curl("/", token=t)
    assert r.status == 200 and r.headers["content-type"] == "text/plain"
    assert r.body == "a/b/\naccessTokenHash\naddress\nenvID\nflag\ninstanceID\nlatest/\nlist\nnothing\nnum"
    assert curl("/latest/meta-data/", token=t).body == "ami-id\nreservation-id"
    assert curl("/latest/meta-data/ami-id", token=t).body == "ami-12345678"
    # '//' collapses, a trailing '/' is tolerated, JSON Pointer escapes.
    assert curl("//latest///meta-data//ami-id/", token=t).body == "ami-12345678"
    assert curl("/a~1b/c~0d", token=t).body == "escaped"
    # Accept other than exactly application/json gives IMDS text.
    r = curl("/latest", "-H", "Accept: application/json, text/plain", token=t)
    assert r.body == "meta-data/"
    r = curl("/latest", token=t, json_accept=True)
    assert json.loads(r.body) == DOC["latest"]


@pytest.mark.parametrize("path", ["/num", "/flag", "/nothing", "/list"])
def test_unsupported_imds_types_501(mmds, curl, path):
    mmds(document=DOC)
    t = curl.token()
    r = curl(path, token=t)
    assert r.status == 501
    assert r.body == "Cannot retrieve value. The value has an unsupported type."
    r = curl(path, token=t, json_accept=True)
    assert r.status == 200 and json.loads(r.body) == DOC[path[1:]]


def test_missing_path_404(mmds, curl):
    mmds(document=DOC)
    t = curl.token()
    r = curl("/latest/nope//x", token=t)
    assert (r.status, r.body) == (404, "Resource not found: /latest/nope//x.")
    r = curl("/num/deeper", token=t, json_accept=True)
    assert r.status == 404


def test_token_errors_400(mmds, curl):
    mmds(document=DOC)
    r = curl("/latest/api/token", method="PUT")
    assert r.status == 400 and r.body.startswith("Token time to live value not found.")
    r = curl("/latest/api/token", "-H", "X-metadata-token-ttl-seconds: abc", method="PUT")
    assert r.status == 400
    assert r.body == "Invalid header. Reason: Invalid value. Key:X-metadata-token-ttl-seconds; Value:abc"
    for ttl in ("0", "21601", "4294967295"):
        r = curl("/latest/api/token", "-H", f"X-metadata-token-ttl-seconds: {ttl}", method="PUT")
        assert r.status == 400
        assert r.body == (f"Invalid time to live value provided for token: {ttl}. "
                          "Please provide a value between 1 and 21600.")
    r = curl("/latest/api/token", "-H", "X-metadata-token-ttl-seconds: 4294967296", method="PUT")
    assert r.status == 400 and "Invalid value" in r.body
    r = curl("/latest/api/token", "-H", "X-metadata-token-ttl-seconds: 60", "-H", "X-Forwarded-For: 1.2.3.4",
             method="PUT")
    assert (r.status, r.body) == (400, "Invalid header. Reason: Unsupported header name. Key: X-Forwarded-For")
    r = curl("/latest/api/other", "-H", "X-metadata-token-ttl-seconds: 60", method="PUT")
    assert (r.status, r.body) == (404, "Resource not found: /latest/api/other.")
    r = curl("//latest//api/token", "-H", "X-metadata-token-ttl-seconds: 1", method="PUT")
    assert r.status == 200


def test_token_required_401(mmds, curl):
    mmds(document=DOC)
    r = curl("/")
    assert r.status == 401
    assert r.body == ("No MMDS token provided. Use `X-metadata-token` or `X-aws-ec2-metadata-token` "
                      "header to specify the session token.")
    for bad in ("nonsense", "A" * 75, curl.token()[:-1] + "x"):
        r = curl("/", token=bad)
        assert (r.status, r.body) == (401, "MMDS token not valid."), bad


def test_token_from_another_server_refused(mmds, curl):
    s = mmds(document=DOC)
    t = curl.token()
    assert curl("/", token=t).status == 200
    s.stop()
    mmds(document=DOC)
    assert curl("/", token=t).status == 401  # a new key per start


def test_token_expires(mmds, curl):
    mmds(document=DOC)
    t = curl.token(ttl=1)
    assert curl("/envID", token=t).body == "tmpl-abcd"
    time.sleep(1.2)
    r = curl("/envID", token=t)
    assert (r.status, r.body) == (401, "MMDS token not valid.")


@pytest.mark.parametrize("method", ["POST", "DELETE", "PATCH", "HEAD", "OPTIONS"])
def test_other_methods_405(mmds, curl, method):
    mmds(document=DOC)
    r = curl("/", method=method)
    assert r.status == 405
    assert r.headers["allow"] == "GET, PUT"
    if method != "HEAD":
        assert r.body == "Not allowed HTTP method."


def test_head_gets_no_body_and_keeps_framing(mmds, netns):
    mmds(document=DOC)
    s = netns.connect()
    s.sendall(b"HEAD / HTTP/1.1\r\n\r\n"
              b"PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 5\r\nConnection: close\r\n\r\n")
    out = http_raw(s, b"")
    s.close()
    head, _, rest = out.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 405 ") and b"Allow: GET, PUT" in head and b"Content-Length: 24" in head
    # No body followed the HEAD answer: the next bytes are the next answer.
    assert rest.startswith(b"HTTP/1.1 200 "), rest


def test_v1_tokens_optional(mmds, curl):
    mmds("--v1", document=DOC)
    assert curl("/envID").body == "tmpl-abcd"
    # Firecracker's V1 serves even with a bad token (it only counts it).
    assert curl("/envID", token="bogus").body == "tmpl-abcd"
    assert curl("/envID", token=curl.token()).body == "tmpl-abcd"


def test_before_document_default_is_non_json_503(mmds, curl):
    mmds()
    t = curl.token()  # tokens work before a document
    r = curl("/", token=t, json_accept=True)
    assert r.status == 503 and r.headers["content-type"] == "text/plain"
    with pytest.raises(ValueError):
        json.loads(r.body)


@pytest.mark.parametrize("mode,body", [("null", "null"), ("object", "{}")])
def test_before_document_options(mmds, curl, mode, body):
    mmds(f"--empty-document={mode}")
    r = curl("/", token=curl.token(), json_accept=True)
    assert (r.status, r.body) == (200, body)


def test_document_file_replaced_and_invalid_kept(mmds, curl):
    s = mmds()
    t = curl.token()
    s.write_document({"v": "1"})
    _wait_body(curl, "/v", t, "1")
    s.write_document({"v": "2"})
    _wait_body(curl, "/v", t, "2")
    # Written in place (open, truncate, write, close) also works.
    s.document.write_text(json.dumps({"v": "3"}))
    _wait_body(curl, "/v", t, "3")
    s.write_document(None, raw="{not json")
    s.write_document(None, raw=json.dumps({"v": "x" * 60000}))
    time.sleep(0.3)
    assert curl("/v", token=t).body == "3"
    log = s.log()
    assert "invalid JSON" in log and "over the 51200-byte limit" in log, log
    os.unlink(s.document)
    time.sleep(0.2)
    assert curl("/v", token=t).body == "3"


def test_max_size_option(mmds, curl):
    s = mmds("--max-size", "100")
    s.write_document({"v": "y" * 200})
    end = time.monotonic() + 5
    while "over the 100-byte limit" not in s.log() and time.monotonic() < end:
        time.sleep(0.05)
    s.write_document({"v": "small"})
    _wait_body(curl, "/v", curl.token(), "small")
    assert "over the 100-byte limit" in s.log()


def _wait_body(curl, path, token, want, timeout=5):
    end = time.monotonic() + timeout
    while True:
        r = curl(path, token=token)
        if r.body == want or time.monotonic() > end:
            assert r.body == want, r
            return
        time.sleep(0.05)


def test_control_socket_host_api(mmds, curl):
    s = mmds()
    st = os.stat(s.control)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == 0
    assert stat.S_IMODE(os.stat(s.control.parent).st_mode) == 0o700
    r = curl("/mmds", unix=s.control)
    assert (r.status, r.body) == (200, "null")
    r = curl("/mmds", unix=s.control, method="PATCH", data='{"a":"b"}')
    assert r.status == 400 and "not initialized" in json.loads(r.body)["fault_message"]
    r = curl("/mmds", unix=s.control, method="PUT", data="{bad")
    assert r.status == 400 and "fault_message" in json.loads(r.body)
    r = curl("/mmds", unix=s.control, method="PUT", data=json.dumps({"big": "z" * 51200}))
    assert r.status == 413
    r = curl("/mmds", unix=s.control, method="PUT", data=json.dumps({"a": {"b": "c", "d": "e"}, "k": "v"}))
    assert r.status == 204 and r.body == ""
    r = curl("/mmds", unix=s.control, method="PATCH", data='{"a":{"d":null,"x":"y"},"k":null}')
    assert r.status == 204
    r = curl("/mmds", unix=s.control)
    assert json.loads(r.body) == {"a": {"b": "c", "x": "y"}}
    r = curl("/mmds", unix=s.control, method="PATCH", data=json.dumps({"big": "z" * 51200}))
    assert r.status == 413
    assert curl("/a/x", token=curl.token()).body == "y"
    r = curl("/other", unix=s.control)
    assert r.status == 400
    # The control API is not on the guest port.
    assert curl("/mmds", unix=None, method="PATCH", data="{}").status == 405


def test_control_path_not_a_socket_refused(tools, netns, tmp_path):
    bad = tmp_path / "ctl"
    bad.write_text("precious")
    cp = tools.run("mmds-serve", "--listen", "127.0.0.1:0", "--document", tmp_path / "d.json",
                   "--control", bad, timeout=30)
    assert cp.returncode == 1 and "exists and is not a socket" in cp.stderr
    assert bad.read_text() == "precious"


def test_usage_errors(tools):
    assert tools.run("mmds-serve", "--empty-document=maybe").returncode == 2
    assert tools.run("mmds-serve", "--max-size", "-1").returncode == 2
    assert tools.run("mmds-serve", "extra").returncode == 2
    cp = tools.run("mmds-serve", "--help")
    assert cp.returncode == 0 and "--empty-document" in cp.stdout


def test_keep_alive_pipelining_close(mmds, netns, curl):
    mmds(document=DOC)
    t = curl.token()
    s = netns.connect()
    req = (f"GET /envID HTTP/1.1\r\nHost: x\r\nX-metadata-token: {t}\r\n\r\n"
           f"GET /instanceID HTTP/1.1\r\nX-metadata-token: {t}\r\n\r\n"
           "PUT /latest/api/token HTTP/1.1\r\nX-metadata-token-ttl-seconds: 5\r\nContent-Length: 0\r\n\r\n"
           f"GET /latest/meta-data/ami-id HTTP/1.1\r\nX-metadata-token: {t}\r\nConnection: close\r\n\r\n")
    s.sendall(req.encode())
    answers = []
    leftover = b""
    for _ in range(4):
        status, headers, body, leftover = read_response(s, buf=leftover)
        answers.append((status, body))
    assert not leftover
    assert answers[0] == (200, b"tmpl-abcd") and answers[1] == (200, b"sbx-1234")
    assert answers[2][0] == 200 and len(answers[2][1]) > 30
    assert answers[3] == (200, b"ami-12345678")
    assert s.recv(10) == b""  # closed after Connection: close
    s.close()
    # HTTP/1.0 closes by default.
    s = netns.connect()
    s.sendall(f"GET /envID HTTP/1.0\r\nX-metadata-token: {t}\r\n\r\n".encode())
    status, headers, body, _ = read_response(s)
    assert (status, body, headers.get("connection")) == (200, b"tmpl-abcd", "close")
    assert s.recv(10) == b""
    s.close()


def test_control_expect_100_continue_curl(mmds, netns):
    """With `Expect: 100-continue` (curl sends it by itself only for bodies
    over 1 MiB, beyond this API's limit; -H makes it), curl holds the body
    until an answer or its expect timeout (made long here). The server must
    answer 100 at once: waiting would run into the request deadline (short
    here) and refuse a valid PUT."""
    s = mmds("--request-timeout", "0.5")
    doc = {"big": "z" * 30000}
    cp = netns.run("curl", "-sS", "-v", "--max-time", "20", "--expect100-timeout", "15",
                   "-H", "Expect: 100-continue",
                   "--unix-socket", s.control, "-X", "PUT", "--data-binary", json.dumps(doc),
                   "-o", "/dev/null", "-w", "%{http_code}", "http://localhost/mmds", timeout=30)
    assert "> Expect: 100-continue" in cp.stderr, cp.stderr  # what this test is about
    assert "< HTTP/1.1 100 Continue" in cp.stderr, cp.stderr
    assert cp.stdout == "204", cp.stdout + cp.stderr
    r = netns.run("curl", "-s", "--unix-socket", s.control, "http://localhost/mmds", timeout=30)
    assert json.loads(r.stdout) == doc


def test_control_expect_raw_client(mmds, netns):
    s = mmds()
    body = json.dumps({"k": "v"}).encode()
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(str(s.control))
        c.settimeout(10)
        c.sendall(b"PUT /mmds HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body))
        interim = b""
        while not interim.endswith(b"\r\n\r\n"):
            interim += c.recv(1)  # only the interim answer: the final one needs the body
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        c.sendall(body)
        status, _, _, rest = read_response(c)
        assert status == 204 and rest == b""
        # Over the limit: refused with 417 before the body is sent.
        c.sendall(b"PUT /mmds HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 999999999\r\n\r\n")
        out = http_raw(c, b"")
    assert out.startswith(b"HTTP/1.1 417 ") and b"Connection: close" in out, out
    assert b"100 Continue" not in out
    # Without Expect, an oversized body stays a 413.
    with socket.socket(socket.AF_UNIX) as c:
        c.connect(str(s.control))
        c.sendall(b"PUT /mmds HTTP/1.1\r\nContent-Length: 999999999\r\n\r\n")
        assert http_raw(c, b"").startswith(b"HTTP/1.1 413 ")


def test_control_socket_mode_set_without_chmod_by_path(tools, tmp_path):
    """The control socket is born 0600 (umask at bind): no chmod() by path,
    which would follow a symlink swapped in after bind. strace shows every
    chmod-family call the server makes."""
    ctl = tmp_path / "ctl" / "control.sock"
    trace = tmp_path / "trace"
    log = open(tmp_path / "log", "w+")
    p = subprocess.Popen(["strace", "-f", "-qq", "-o", trace, "-e", "trace=%file,fchmod,fchown",
                          tools.path("mmds-serve"), "--listen", "127.0.0.1:0", "--document", tmp_path / "d.json",
                          "--control", ctl], stdout=subprocess.DEVNULL, stderr=log)
    try:
        end = time.monotonic() + 20
        while not ctl.exists() and time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        assert ctl.exists(), open(tmp_path / "log").read()
        assert stat.S_IMODE(os.stat(ctl).st_mode) == 0o600
    finally:
        children = pathlib.Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        for pid in children:  # the server; strace exits with it
            os.kill(int(pid), signal.SIGTERM)
        p.wait(20)
        log.close()
    calls = trace.read_text().splitlines()
    assert any("bind(" in c or "control.sock" in c for c in calls), calls  # the trace saw the socket
    assert not [c for c in calls if "chmod" in c and "control.sock" in c], calls
