#!/usr/bin/python3
"""The clone step's round trip against the warmup's, on one socket.

Boots the e2b-rt image once (tests/boot/snapshot.py: QEMU, the
hybrid-vsock stand-in as the VMM's socket, socat into vsock_loopback in the
guest), admits CID 1 to the clone step as the snapshot test's image does
(a restart of the resident e2b-clone.service with the test drop-in), then
times ROUNDS `e2b-hostlink clone --generation N --document doc.json`
(the whole step: entropy, clock, token key, document, generation) and ROUNDS
`e2b-hostlink wait` (envd's /health through the 49983 relay), interleaved,
each a fresh process and connection as a pool's warmup runs them; and ROUNDS
`e2b-hostlink restore` (the pool's whole path after a restore: the clone
step, envd's /health, /init with a fresh access token whose hash the new
document carries, the authenticated check), interleaved with the others.
Prints the medians, the ratios clone/wait and restore/wait, restore's
median per step (its own `step=NAME ms=N` lines), the resident e2b-clone's
idle VmRSS at boot and the load average.

    bench/clone.sh [--rootfs out/e2b-rt/rootfs.ext4] [--rounds 30]
"""
import argparse
import hashlib
import json
import os
import pathlib
import secrets
import shutil
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "boot"))
import snapshot  # noqa: E402
import vm  # noqa: E402


def timed(m, *args) -> tuple[float, str]:
    t0 = time.perf_counter()
    cp = m.hostlink(*args, timeout=60)
    dt = (time.perf_counter() - t0) * 1000
    if cp.returncode != 0:
        raise RuntimeError(f"e2b-hostlink {' '.join(map(str, args))}: {cp.stderr.strip()}")
    return dt, cp.stdout


def restore_round(m, work: pathlib.Path, generation: int, steps: dict) -> float:
    """One restore with a fresh token and a document that carries its hash;
    adds each step's own figure (its `step=NAME ms=N` line) to STEPS."""
    token = secrets.token_hex(24)
    tf, doc = work / "token", work / "restore-doc.json"
    tf.write_text(token)
    doc.write_text(json.dumps(vm.make_document(hashlib.sha512(token.encode()).hexdigest())))
    dt, out = timed(m, "restore", "--generation", generation, "--document", doc, "--token-file", tf)
    for line in out.splitlines():
        head, _, rest = line.partition(" ")
        if head.startswith("step=") and rest.startswith("ms="):
            steps.setdefault(head[5:], []).append(int(rest[3:].split(" ")[0]))
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
            ready = m.line(timeout=600)
            m.ask("allow-cid1")
            timed(m, "wait")  # warm both paths once
            clone, wait, restore, steps = [], [], [], {}
            for n in range(1, a.rounds + 1):
                clone.append(timed(m, "clone", "--generation", 2 * n - 1, "--document", doc)[0])
                wait.append(timed(m, "wait")[0])
                restore.append(restore_round(m, work, 2 * n, steps))
            m.monitor("quit", timeout=30)
        c, w, r = statistics.median(clone), statistics.median(wait), statistics.median(restore)
        print(f"clone round trip: median {c:.1f} ms (min {min(clone):.1f}, max {max(clone):.1f}), "
              f"{a.rounds} rounds")
        print(f"wait round trip (peer): median {w:.1f} ms (min {min(wait):.1f}, max {max(wait):.1f})")
        print(f"ratio clone/wait: {c / w:.2f}")
        print(f"restore (clone, /health, /init, token check): median {r:.1f} ms "
              f"(min {min(restore):.1f}, max {max(restore):.1f})")
        print(f"ratio restore/wait: {r / w:.2f}")
        print("restore's steps, median ms: " + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in steps.items()))
        print(f"e2b-clone resident from boot: pid {ready.get('clone_pid')}, "
              f"idle VmRSS {ready.get('clone_rss_kb')} kB")
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
