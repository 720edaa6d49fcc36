#!/usr/bin/python3
"""The clone step's round trip against the warmup's, on one socket.

Boots the e2b-rt image once (tests/boot/snapshot.py: QEMU, the
hybrid-vsock stand-in as the VMM's socket, socat into vsock_loopback in the
guest), admits CID 1 to the clone step as the snapshot test's image does,
then times ROUNDS `e2b-hostlink clone --generation N --document doc.json`
(the whole step: entropy, clock, token key, document, generation) and ROUNDS
`e2b-hostlink wait` (envd's /health through the 49983 relay), interleaved,
each a fresh process and connection as a pool's warmup runs them. Prints the
medians, the ratio clone/wait and the load average.

    bench/clone.sh [--rootfs out/e2b-rt/rootfs.ext4] [--rounds 30]
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "boot"))
import snapshot  # noqa: E402
import vm  # noqa: E402


def timed(m, *args) -> float:
    t0 = time.perf_counter()
    cp = m.hostlink(*args, timeout=60)
    dt = (time.perf_counter() - t0) * 1000
    if cp.returncode != 0:
        raise RuntimeError(f"e2b-hostlink {' '.join(map(str, args))}: {cp.stderr.strip()}")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rootfs", type=pathlib.Path, default=ROOT / "out" / "e2b-rt" / "rootfs.ext4")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    if not a.rootfs.exists():
        print(f"clone bench: {a.rootfs}: no image; build it with `make flavor=e2b-rt`", file=sys.stderr)
        return 1
    work = pathlib.Path(tempfile.mkdtemp(prefix="e2b-clone-bench-"))
    try:
        t = snapshot.Template(a.rootfs, work, vmgenid=False)
        doc = work / "doc.json"
        doc.write_text(json.dumps(vm.make_document()))
        with snapshot.Machine(work, "bench", t.argv(t.overlay, doc)) as m:
            m.line(timeout=600)
            m.ask("allow-cid1")
            timed(m, "wait")  # warm both paths once
            clone, wait = [], []
            for n in range(1, a.rounds + 1):
                clone.append(timed(m, "clone", "--generation", n, "--document", doc))
                wait.append(timed(m, "wait"))
            m.monitor("quit", timeout=30)
        c, w = statistics.median(clone), statistics.median(wait)
        print(f"clone round trip: median {c:.1f} ms (min {min(clone):.1f}, max {max(clone):.1f}), "
              f"{a.rounds} rounds")
        print(f"wait round trip (peer): median {w:.1f} ms (min {min(wait):.1f}, max {max(wait):.1f})")
        print(f"ratio clone/wait: {c / w:.2f}")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
