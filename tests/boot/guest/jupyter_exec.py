#!/usr/bin/python3
"""Test only (tests/boot): run one cell through Jupyter's REST + websocket API.

Usage: jupyter_exec.py HOST:PORT CODE  -> prints "result=<text/plain>" and
exits 0 when the kernel sent an execute_result. Standard library only (the
e2b-ci image has python3, nothing else is assumed): a minimal RFC 6455 client
for one text exchange on the kernel's channels socket.
"""
import base64
import http.client
import json
import os
import socket
import struct
import sys
import time
import uuid


def rest(conn, method, path, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status >= 300:
        raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {data[:200]!r}")
    return json.loads(data) if data else None


def ws_connect(host, port, path):
    sock = socket.create_connection((host, port), timeout=180)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                  f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise RuntimeError(f"websocket {path}: closed during handshake")
        head += chunk
    if b" 101 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(f"websocket {path}: no 101: {head[:100]!r}")
    return sock


def ws_send(sock, text):
    payload = text.encode()
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x81, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x81, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("websocket closed")
        buf += chunk
    return buf


def ws_recv(sock):
    """One complete text message (fragments joined); control frames skipped."""
    parts = []
    while True:
        b0, b1 = recv_exact(sock, 2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", recv_exact(sock, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", recv_exact(sock, 8))[0]
        mask = recv_exact(sock, 4) if b1 & 0x80 else None
        data = recv_exact(sock, n)
        if mask:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        opcode = b0 & 0x0F
        if opcode == 0x8:
            raise RuntimeError("websocket closed by server")
        if opcode in (0x9, 0xA):
            continue
        parts.append(data)
        if b0 & 0x80:
            return b"".join(parts).decode()


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    code = sys.argv[2]
    conn = http.client.HTTPConnection(host, int(port), timeout=180)
    kernel = rest(conn, "POST", "/api/kernels", {"name": "python3"})
    try:
        sock = ws_connect(host, int(port), f"/api/kernels/{kernel['id']}/channels")
        msg_id = uuid.uuid4().hex
        ws_send(sock, json.dumps({
            "header": {"msg_id": msg_id, "username": "e2b-test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))
        deadline = time.monotonic() + 240
        result = None
        while time.monotonic() < deadline:
            msg = json.loads(ws_recv(sock))
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind = msg.get("msg_type") or msg["header"]["msg_type"]
            if kind == "execute_result":
                result = msg["content"]["data"].get("text/plain")
            elif kind == "error":
                print(f"error={msg['content'].get('ename')}: {msg['content'].get('evalue')}")
                return 1
            elif kind == "status" and msg["content"].get("execution_state") == "idle" and result is not None:
                break
        sock.close()
    finally:
        try:
            rest(conn, "DELETE", f"/api/kernels/{kernel['id']}")
        except Exception:  # the VM is thrown away anyway
            pass
    if result is None:
        print("error=no execute_result")
        return 1
    print(f"result={result}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
