#!/usr/bin/python3
"""TEST STAND-IN for Firecracker's (and cloud-hypervisor's) hybrid vsock unix
socket. Never shipped. Our machines have no host-to-guest vsock transport (no
vhost_vsock, no vhost-user-vsock backend), so the host side of e2b-hostlink is
tested against this: it does what the VMM's socket does for host-initiated
connections, and nothing more:

  - accept on a unix socket; read one line "CONNECT <vsock port>\\n";
  - if something "listens on that guest port" (a --map entry whose target
    accepts), answer "OK <host-side port>\\n" and bridge the bytes both ways,
    propagating half-closes (shutdown(SHUT_WR)) like a vsock stream;
  - otherwise close without a word, as Firecracker does.

A "guest port" is a local TCP address or unix socket: --map 49983=127.0.0.1:5000,
--map 10052=unix:/tmp/control.sock. The bridge splices through a pipe per
direction, so the fake is not the slowest part of a benchmark hop.
"""
import argparse
import os
import socket
import sys
import threading

SPLICE = 1 << 20
LINE_MAX = 64  # a CONNECT line is at most 19 bytes; anything longer is refused


def parse_map(items):
    out = {}
    for item in items:
        port, _, target = item.partition("=")
        if target.startswith("unix:"):
            out[int(port)] = (socket.AF_UNIX, target[5:])
        else:
            host, _, p = target.rpartition(":")
            out[int(port)] = (socket.AF_INET, (host, int(p)))
    return out


def pump(src, dst):
    """src -> dst through a pipe with splice; EOF becomes shutdown(SHUT_WR)."""
    r, w = os.pipe()
    try:
        while True:
            try:
                n = os.splice(src.fileno(), w, SPLICE)
            except OSError:
                n = 0
            if n == 0:
                break
            while n:
                try:
                    n -= os.splice(r, dst.fileno(), n)
                except OSError:
                    return
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass
    finally:
        os.close(r)
        os.close(w)


def read_line(conn):
    line = b""
    while not line.endswith(b"\n") and len(line) < LINE_MAX:
        c = conn.recv(1)
        if not c:
            return None
        line += c
    return line


def serve(conn, ports, counter):
    try:
        line = read_line(conn)
        parts = line.decode("ascii", "replace").split() if line else []
        if len(parts) != 2 or parts[0] != "CONNECT" or not parts[1].isdigit() or int(parts[1]) not in ports:
            conn.close()
            return
        family, addr = ports[int(parts[1])]
        guest = socket.socket(family, socket.SOCK_STREAM)
        try:
            guest.connect(addr)
        except OSError:
            guest.close()
            conn.close()
            return
        with counter[1]:
            counter[0] += 1
            host_port = 1073741824 + counter[0]
        conn.sendall(f"OK {host_port}\n".encode())
        t = threading.Thread(target=pump, args=(guest, conn), daemon=True)
        t.start()
        pump(conn, guest)
        t.join()
        guest.close()
        conn.close()
    except OSError:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uds", required=True)
    ap.add_argument("--map", action="append", default=[], help="VSOCKPORT=HOST:PORT or VSOCKPORT=unix:PATH")
    a = ap.parse_args()
    ports = parse_map(a.map)
    try:
        os.unlink(a.uds)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(a.uds)
    srv.listen(256)
    print("ready", flush=True)
    counter = [0, threading.Lock()]
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, ports, counter), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
