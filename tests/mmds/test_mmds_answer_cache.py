"""mmds-serve keeps whole guest answers per document version
(mmds/answer_cache.c). These tests hold it to what it must not change: a
cached answer is byte for byte the answer rendered afresh, and after every
kind of document change (the file renamed over, the file written in place,
a control PUT, a control PATCH) the same keep-alive connection gets the new
document at once. Real curl, real sockets; both builds."""
import json
import time

from mmds_fixtures import curl, mmds, netns  # noqa: F401  (fixtures)
from mmds_helpers import read_response

DOC = {"instanceID": "sbx-1", "envID": "tmpl-1", "latest": {"meta-data": {"ami-id": "ami-1"}}}
PATHS = [("/", True), ("/", False), ("/latest/meta-data/", False), ("/latest", True), ("/envID", False)]


def _get(sock, token, path, json_accept, close=False, buf=b""):
    req = f"GET {path} HTTP/1.1\r\nHost: x\r\nX-metadata-token: {token}\r\n"
    if json_accept:
        req += "Accept: application/json\r\n"
    if close:
        req += "Connection: close\r\n"
    sock.sendall((req + "\r\n").encode())
    return read_response(sock, buf=buf)


def _expected(doc, path, json_accept):
    v = doc
    for part in [p for p in path.split("/") if p]:
        v = v[part]
    if json_accept:
        return json.dumps(v, sort_keys=True, separators=(",", ":")).encode()
    if isinstance(v, str):
        return v.encode()
    return "\n".join(k + ("/" if isinstance(v[k], dict) else "") for k in sorted(v)).encode()


def _all_answers(sock, token, doc):
    """Every PATHS answer, twice on the one connection (the second from the
    cache): each must be the document's."""
    for _ in range(2):
        for path, json_accept in PATHS:
            status, headers, body, rest = _get(sock, token, path, json_accept)
            assert (status, body, rest) == (200, _expected(doc, path, json_accept), b""), (path, json_accept)
            assert "connection" not in headers


def _wait_document(sock, token, doc, timeout=5):
    want = _expected(doc, "/", True)
    end = time.monotonic() + timeout
    while _get(sock, token, "/", True)[2] != want:
        assert time.monotonic() < end, f"still the old document, want {want!r}"
        time.sleep(0.02)


def test_cached_answer_is_the_rendered_answer(mmds, netns, curl):
    mmds(document=DOC)
    t = curl.token()
    s = netns.connect()
    _all_answers(s, t, DOC)
    for path, json_accept in PATHS:
        cached = _get(s, t, path, json_accept)
        # Connection: close is never cached: rendered afresh each time.
        c = netns.connect()
        fresh = _get(c, t, path, json_accept, close=True)
        c.close()
        assert fresh[0] == cached[0] and fresh[2] == cached[2]
        assert {k: v for k, v in fresh[1].items() if k != "connection"} == cached[1]
        assert fresh[1]["connection"] == "close"
    s.close()


def test_every_document_change_reaches_a_cached_path(mmds, netns, curl):
    srv = mmds(document=DOC)
    t = curl.token()
    s = netns.connect()
    _all_answers(s, t, DOC)

    doc = dict(DOC, envID="tmpl-renamed")
    srv.write_document(doc)
    _wait_document(s, t, doc)
    _all_answers(s, t, doc)

    doc = dict(DOC, envID="tmpl-in-place")
    srv.document.write_text(json.dumps(doc))
    _wait_document(s, t, doc)
    _all_answers(s, t, doc)

    doc = dict(DOC, envID="tmpl-put")
    r = curl("/mmds", unix=srv.control, method="PUT", data=json.dumps(doc))
    assert r.status == 204
    _all_answers(s, t, doc)  # at once: the control API answered after the swap

    r = curl("/mmds", unix=srv.control, method="PATCH", data='{"latest":{"meta-data":{"ami-id":"ami-2"}}}')
    assert r.status == 204
    doc = dict(doc, latest={"meta-data": {"ami-id": "ami-2"}})
    _all_answers(s, t, doc)
    status, _, body, _ = _get(s, t, "/latest/meta-data/ami-id", False)
    assert (status, body) == (200, b"ami-2")

    # Back to a document seen before: its answers are rendered from it
    # again, not taken from an older version's.
    r = curl("/mmds", unix=srv.control, method="PUT", data=json.dumps(DOC))
    assert r.status == 204
    _all_answers(s, t, DOC)
    s.close()
