#!/usr/bin/python3
"""e2b-hostlink forward vs socat, same hop, same run; relay idle RSS.

The hop: a TCP client on 127.0.0.1 -> [forward | socat] -> the stand-in of
Firecracker's hybrid-vsock socket (tests/hostlink/fake_hybrid_vsock.py, which
splices) -> a loopback server. forward does the "CONNECT 49983" handshake
itself; socat (TCP-LISTEN:…,fork UNIX-CONNECT:…) cannot, so its client sends
the line and reads "OK <n>" in-band before the measured part. Rounds alternate
between the two so a load burst from elsewhere lands on both; medians are
compared.

- throughput: 1 GiB written, then shutdown(SHUT_WR); the server counts to EOF
  and answers; time from first byte to the answer. Target >= 1.0x socat's.
- latency: one keep-alive connection, 64-byte request, 64-byte answer, many
  times; p99. Target <= socat's.
- idle RSS (VmRSS) of every relay process: vsock-relay as the dynamic and as
  a fixed relay (as the units run them, socket-activated on loopback TCP
  here), after serving a connection, at rest. Target <= 2 MiB. Also
  systemd-socket-proxyd, the peer the fixed relays would otherwise use.
"""
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "hostlink"))
from harness import free_port, recv_to_eof  # noqa: E402
from hostlink_helpers import fake_vmm  # noqa: E402
from relay_helpers import activated, bind_below_ephemeral, wait_port  # noqa: E402

BUILD = pathlib.Path(os.environ.get("BUILD", ROOT / "build"))
HOSTLINK = BUILD / "e2b-hostlink"
RELAY = BUILD / "vsock-relay"
PROXYD = "/lib/systemd/systemd-socket-proxyd"
GIB = int(os.environ.get("BENCH_BYTES", 1 << 30))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", 5))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", 5000))
GUEST_PORT = 49983


def sink_server():
    """Counts bytes to EOF, answers the count. Also a 64-byte echo for keep-alive."""
    srv = socket.socket()
    bind_below_ephemeral(srv)  # the dynamic relay refuses the ephemeral range
    srv.listen(16)

    def serve(c):
        with c:
            first = c.recv(1)
            if first == b"E":  # echo mode: fixed 64-byte frames
                buf = bytearray(64)
                while True:
                    view, got = memoryview(buf), 0
                    while got < 64:
                        n = c.recv_into(view[got:])
                        if not n:
                            return
                        got += n
                    c.sendall(buf)
            total = len(first)
            buf = bytearray(1 << 20)
            while True:
                n = c.recv_into(buf)
                if not n:
                    break
                total += n
            c.sendall(str(total).encode())

    def run():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=run, daemon=True).start()
    return srv


def connect(port, inband):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if inband:  # socat's client does the VMM handshake itself
        s.sendall(f"CONNECT {GUEST_PORT}\n".encode())
        line = b""
        while not line.endswith(b"\n"):
            line += s.recv(1)
        assert line.startswith(b"OK "), line
    return s


def throughput(port, inband):
    chunk = memoryview(bytearray(b"x" * (1 << 20)))
    s = connect(port, inband)
    t0 = time.perf_counter()
    sent = 0
    while sent < GIB:
        s.sendall(chunk[: min(len(chunk), GIB - sent)])
        sent += min(len(chunk), GIB - sent)
    s.shutdown(socket.SHUT_WR)
    answer = recv_to_eof(s, 64)
    dt = time.perf_counter() - t0
    s.close()
    assert int(answer) == GIB, answer
    return GIB / dt / 1e6  # MB/s


def latency_p99(port, inband):
    s = connect(port, inband)
    s.sendall(b"E")
    msg = b"q" * 64
    times = []
    for _ in range(REQUESTS):
        t0 = time.perf_counter()
        s.sendall(msg)
        got = 0
        while got < 64:
            got += len(s.recv(64 - got))
        times.append(time.perf_counter() - t0)
    s.close()
    times.sort()
    return times[int(len(times) * 0.99)] * 1e6  # µs


def vmrss_kb(pid):
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return -1




def idle_rss(tmp):
    out = {}
    sink = sink_server()
    target = sink.getsockname()[1]
    for name, argv in (("vsock-relay", [str(RELAY)]),
                       ("vsock-relay --to-port", [str(RELAY), "--to-port", str(target)]),
                       ("systemd-socket-proxyd (not used)", [PROXYD, "--connections-max=64", f"127.0.0.1:{target}"])):
        with activated(argv, tmp / f"{name}.log") as (port, proc):
            s = socket.create_connection(("127.0.0.1", port))
            if name == "vsock-relay":
                s.sendall(f"CONNECT {target}\n".encode())
                assert s.recv(3) == b"OK\n"
            s.sendall(b"hello")
            s.shutdown(socket.SHUT_WR)
            while s.recv(64):
                pass
            s.close()
            time.sleep(0.5)
            out[name] = vmrss_kb(proc.pid)
    sink.close()
    return out


def main():
    import tempfile
    for p in (HOSTLINK, RELAY):
        if not p.exists():
            sys.exit(f"bench/hostlink: {p} missing: run make tools")
    if subprocess.run(["sh", "-c", "command -v socat"], capture_output=True).returncode:
        sys.exit("bench/hostlink: socat missing (make deps)")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="e2b-bench-hostlink-"))
    sink = sink_server()
    fwd_port, socat_port = free_port(), free_port()
    procs = []
    try:
        with fake_vmm(tmp / "v.sock", {GUEST_PORT: f"127.0.0.1:{sink.getsockname()[1]}"}) as uds:
            procs.append(subprocess.Popen([str(HOSTLINK), "--uds", str(uds), "forward", "--listen",
                                           f"127.0.0.1:{fwd_port}", str(GUEST_PORT)], stderr=subprocess.DEVNULL))
            procs.append(subprocess.Popen(["socat", f"TCP-LISTEN:{socat_port},bind=127.0.0.1,fork,reuseaddr",
                                           f"UNIX-CONNECT:{uds}"], stderr=subprocess.DEVNULL))
            wait_port(fwd_port)
            wait_port(socat_port)
            tput = {"forward": [], "socat": []}
            p99 = {"forward": [], "socat": []}
            sides = (("forward", fwd_port, False), ("socat", socat_port, True))
            # Latency first, then throughput, each in alternating rounds: a
            # 1 GiB stream just before a latency round skews its tail.
            for r in range(ROUNDS):
                for name, port, inband in sides[:: 1 if r % 2 == 0 else -1]:
                    p99[name].append(latency_p99(port, inband))
            for r in range(ROUNDS):
                for name, port, inband in sides[:: 1 if r % 2 == 0 else -1]:
                    tput[name].append(throughput(port, inband))
            load = os.getloadavg()
            tf, ts = statistics.median(tput["forward"]), statistics.median(tput["socat"])
            pf, ps = statistics.median(p99["forward"]), statistics.median(p99["socat"])
            print(f"hostlink bench: {GIB >> 20} MiB x {ROUNDS} rounds, {REQUESTS} keep-alive requests per round; "
                  f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
            print(f"  throughput MB/s  forward {tf:.0f} (rounds {[round(x) for x in tput['forward']]})  "
                  f"socat {ts:.0f} (rounds {[round(x) for x in tput['socat']]})  ratio {tf / ts:.2f}x (target >= 1.0)")
            print(f"  p99 latency µs   forward {pf:.0f} (rounds {[round(x) for x in p99['forward']]})  "
                  f"socat {ps:.0f} (rounds {[round(x) for x in p99['socat']]})  ratio {pf / ps:.2f} (target <= 1.0)")
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        sink.close()
    rss = idle_rss(tmp)
    print("  idle VmRSS kB    " + "  ".join(f"{k} {v}" for k, v in rss.items()) + "  (target <= 2048 each)")


if __name__ == "__main__":
    main()
