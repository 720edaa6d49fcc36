#!/usr/bin/python3
"""Bench (issues 12, 36): guest memory of e2b-ci booted in QEMU at the pool sizes.

Boots out/e2b-ci/rootfs.ext4 (or ROOTFS) with tests/boot/vm.py's harness
(kernel, initramfs, qcow2 overlay, private network namespace; removed on
exit) at `small` (1 vCPU, 512 MiB) and `medium` (2 vCPU, 1 GiB). A
bench-only unit, added to the boot's test payload under /run and ordered
before the boot probe, waits until envd, Jupyter and the API server answer,
lets the API server's default python kernel idle, then reads MemAvailable
and each process's PSS; then runs `import pandas, matplotlib` in that kernel
through POST /execute on :49999 and reads MemAvailable again.

Then (issue 36) the first run in each language the image's kernels serve
(its manifest's `kernels`): a context created for it (POST /contexts, as the
SDKs' createCodeContext) and its first POST /execute, each timed in the guest.

    bench/e2b-ci-vm-memory.py [--sizes 512,1024] [--wait SECONDS] [--peer ROOTFS] [ROOTFS]

Peers: the goal of issue 12, MemAvailable >= 200 MiB on `small` with the
stack idle (the reference deployment reports about 90 MiB there); with
--peer (e.g. a `kernels=python` build), that image booted at the same sizes
in the same run: the start (boot to :49999 healthy) ratio, goal <= 1.15, and
MemAvailable beside it (goal of issue 36: >= 500 MiB at 1 GiB with the
server's two default contexts, python and javascript).
"""
import argparse
import json
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "boot"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import guest_bench  # noqa: E402
import vm  # noqa: E402

GOAL_KIB = 200 * 1024
GOAL_1G_KIB = 500 * 1024
START_GOAL = 1.15
# The first run per SDK language, and the kernel each needs (kernels=).
FIRST_RUN = {"python": ("python", "1 + 1"), "js": ("javascript", "1 + 1"), "ts": ("javascript", "1 + 1"),
             "r": ("r", "1 + 1"), "bash": ("bash", "echo 2"), "java": ("java", "1 + 1")}

DESCRIPTION = "e2b-ci memory once the code interpreter is up"

# In the guest. Reports "E2B-PROBE bench_*=" lines like the boot probe.
SCRIPT = r"""avail() { awk '/^MemAvailable:/{print $2}' /proc/meminfo; }
pss() {
	local p cmd
	for p in $(ps -eo pid= --sort=-rss | head -n 12); do
		cmd=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-60)
		[ -n "$cmd" ] || continue
		printf '%s KiB %s\n' "$(awk '/^Pss:/{print $2}' /proc/$p/smaps_rollup 2>/dev/null)" "$cmd"
	done
}
report bench_mem_total_kb "$(awk '/^MemTotal:/{print $2}' /proc/meminfo)"
up=0
start=$(cut -d. -f1 /proc/uptime)
while [ $(( $(cut -d. -f1 /proc/uptime) - start )) -lt "$WAIT" ]; do
	curl -s -o /dev/null --max-time 5 http://127.0.0.1:49983/health &&
	curl -sf -o /dev/null --max-time 5 http://127.0.0.1:8888/api/status &&
	curl -sf -o /dev/null --max-time 5 http://127.0.0.1:49999/health && { up=1; break; }
	sleep 1
done
report bench_up "$up"
report bench_up_uptime_s "$(cut -d' ' -f1 /proc/uptime)"
sleep 20   # the default kernel idles (or, if the stack never came up: the state at the deadline)
report bench_kernels "$(pgrep -fc ipykernel_launcher)"
# Every kernel's argv names its connection file (kernel-<id>.json).
report bench_all_kernels "$(pgrep -fc 'kernel-[0-9a-f-]*\.json')"
report bench_idle_avail_kb "$(avail)"
report_b64 bench_idle_pss_b64 "$(pss)"
report_b64 bench_restarts_b64 "$(systemctl show -P NRestarts jupyter.service code-interpreter.service | tr '\n' ' ')"
if [ "$up" = 1 ]; then
	r=$(curl -s --max-time 300 -H 'Content-Type: application/json' \
		-d '{"code": "import pandas, matplotlib\nprint(pandas.__version__, matplotlib.__version__)"}' \
		http://127.0.0.1:49999/execute)
	report_b64 bench_import_b64 "$(printf '%s' "$r" | head -c 400)"
	sleep 5
	report bench_import_avail_kb "$(avail)"
	report_b64 bench_import_pss_b64 "$(pss)"
	ms() { echo $(( $(date +%s%N) / 1000000 )); }
	for spec in $FIRST_RUN; do   # language=code, the code's spaces as _
		lang=${spec%%=*} code=${spec#*=}
		code=${code//_/ }
		t0=$(ms)
		ctx=$(curl -s --max-time 600 -H 'Content-Type: application/json' -d "{\"language\": \"$lang\"}" \
			http://127.0.0.1:49999/contexts | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p')
		t1=$(ms)
		r=$(curl -s --max-time 600 -H 'Content-Type: application/json' \
			-d "{\"code\": \"$code\", \"context_id\": \"$ctx\"}" http://127.0.0.1:49999/execute | head -c 300)
		t2=$(ms)
		report "bench_first_${lang}_ms" "$((t1 - t0)),$((t2 - t1)),${ctx:+ok}"
		report_b64 "bench_first_${lang}_out_b64" "$r"
	done
	report bench_after_first_avail_kb "$(avail)"
fi
"""


def image_kernels(rootfs: pathlib.Path) -> list:
    """The kernels of ROOTFS's image, from the manifest beside it (all five,
    the default build, when there is none)."""
    manifest = rootfs.parent / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text()).get("kernels", ["python"])
    return ["python", "javascript", "r", "bash", "java"]


def first_run_specs(kernels) -> str:
    return " ".join(f"{lang}={code.replace(' ', '_')}" for lang, (kernel, code) in FIRST_RUN.items()
                    if kernel in kernels)


def add_bench_unit(wait, first_runs=""):
    guest_bench.add_bench_unit(DESCRIPTION, f"WAIT={int(wait)}\nFIRST_RUN='{first_runs}'\n" + SCRIPT)


def mib(kib):
    return f"{int(kib) / 1024:.0f} MiB" if kib else "n/a"


def b64(report, key):
    """A *_b64 value: vm.parse_report has decoded it and dropped the suffix."""
    return report.get(key[:-len("_b64")], "")


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def boot_once(rootfs: pathlib.Path, mem: int, wait: float) -> dict:
    """One boot of ROOTFS at MEM MiB with the bench unit; prints its figures
    and returns its report."""
    kernels = image_kernels(rootfs)
    add_bench_unit(wait, first_run_specs(kernels))
    cpus = 1 if mem <= 512 else 2
    res = vm.boot(vm.Variant("e2b-ci", f"bench-{mem}m", cpus, mem), rootfs, timeout=wait + 900)
    r = res.get("report", {})
    idle, imported = r.get("bench_idle_avail_kb"), r.get("bench_import_avail_kb")
    print(f"\n== {rootfs} (kernels {','.join(kernels)}): {cpus} vCPU, {mem} MiB ({res.get('accel')}),"
          f" host wall {res.get('host_wall_s')} s, load {load()}")
    if res.get("error"):
        print(f"   boot: {res['error']}")
    print(f"   stack up: {'yes' if r.get('bench_up') == '1' else 'NO'}"
          f" at {r.get('bench_up_uptime_s', '?')} s uptime; python kernels: {r.get('bench_kernels', '?')},"
          f" kernels in all: {r.get('bench_all_kernels', '?')};"
          f" NRestarts jupyter/code-interpreter: {b64(r, 'bench_restarts_b64').strip()}")
    print(f"   MemTotal {mib(r.get('bench_mem_total_kb'))}; MemAvailable idle: {mib(idle)}"
          f"; after `import pandas, matplotlib`: {mib(imported)}"
          f"; after the first runs: {mib(r.get('bench_after_first_avail_kb'))}")
    if mem == 512 and idle:
        ok = int(idle) >= GOAL_KIB
        print(f"   goal MemAvailable >= 200 MiB on small: {'met' if ok else 'NOT met'}"
              f" (ratio {int(idle) / GOAL_KIB:.2f}; reference deployment ~90 MiB)")
    if mem == 1024 and idle:
        ok = int(idle) >= GOAL_1G_KIB
        print(f"   goal MemAvailable >= 500 MiB at 1 GiB (two default contexts): {'met' if ok else 'NOT met'}"
              f" (ratio {int(idle) / GOAL_1G_KIB:.2f})")
    print("   largest processes, idle (PSS):")
    for line in b64(r, "bench_idle_pss_b64").splitlines():
        print(f"     {line}")
    if imported:
        print(f"   import result: {b64(r, 'bench_import_b64')[:200]}")
    for lang in FIRST_RUN:
        got = r.get(f"bench_first_{lang}_ms")
        if got:
            create, run, ok = (got.split(",") + ["", "", ""])[:3]
            print(f"   first run in {lang}: context {create} ms, then runCode {run} ms"
                  f"{'' if ok else ' (NO context id)'}; {b64(r, f'bench_first_{lang}_out_b64')[:120]!r}")
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rootfs", nargs="?", type=pathlib.Path, default=ROOT / "out/e2b-ci/rootfs.ext4")
    ap.add_argument("--sizes", default="512,1024", help="guest MiB, comma-separated")
    ap.add_argument("--wait", type=float, default=600, help="seconds to wait for the stack")
    ap.add_argument("--peer", type=pathlib.Path, help="a second image (e2b-ci kernels=python) booted alike")
    a = ap.parse_args()
    for rootfs in filter(None, (a.rootfs, a.peer)):
        if not rootfs.exists():
            print(f"e2b-ci-vm-memory: {rootfs}: no image; run `make flavor=e2b-ci` first (skipped)")
            return 0
    print(f"e2b-ci guest memory: {a.rootfs}{f' against {a.peer}' if a.peer else ''}, load {load()}")
    for mem in (int(s) for s in a.sizes.split(",")):
        r = boot_once(a.rootfs, mem, a.wait)
        if not a.peer:
            continue
        p = boot_once(a.peer, mem, a.wait)
        up, peer_up = r.get("bench_up_uptime_s"), p.get("bench_up_uptime_s")
        if r.get("bench_up") == p.get("bench_up") == "1":
            ratio = float(up) / float(peer_up)
            print(f"\n   {mem} MiB: start to :49999 healthy {float(up):.1f} s against the peer's {float(peer_up):.1f} s:"
                  f" ratio {ratio:.2f} (goal <= {START_GOAL}: {'met' if ratio <= START_GOAL else 'NOT met'})")
        idle, peer_idle = r.get("bench_idle_avail_kb"), p.get("bench_idle_avail_kb")
        if idle and peer_idle:
            print(f"   {mem} MiB: MemAvailable idle {mib(idle)} against the peer's {mib(peer_idle)}:"
                  f" ratio {int(idle) / int(peer_idle):.2f}, load {load()}")
    return 0

if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("e2b-ci-vm-memory: needs root (network namespace, tap)")
    sys.exit(main())
