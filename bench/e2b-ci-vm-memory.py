#!/usr/bin/python3
"""Bench (issue 12): guest memory of e2b-ci booted in QEMU at the pool sizes.

Boots out/e2b-ci/rootfs.ext4 (or ROOTFS) with tests/boot/vm.py's harness
(kernel, initramfs, qcow2 overlay, private network namespace; removed on
exit) at `small` (1 vCPU, 512 MiB) and `medium` (2 vCPU, 1 GiB). A
bench-only unit, added to the boot's test payload under /run and ordered
before the boot probe, waits until envd, Jupyter and the API server answer,
lets the API server's default python kernel idle, then reads MemAvailable
and each process's PSS; then runs `import pandas, matplotlib` in that kernel
through POST /execute on :49999 and reads MemAvailable again.

    bench/e2b-ci-vm-memory.py [--sizes 512,1024] [--wait SECONDS] [ROOTFS]

Peer: the goal of issue 12, MemAvailable >= 200 MiB on `small` with the
stack idle (the reference deployment reports about 90 MiB there).
"""
import argparse
import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "boot"))
import vm  # noqa: E402

GOAL_KIB = 200 * 1024

UNIT = """[Unit]
Description=Bench only: e2b-ci memory once the code interpreter is up
DefaultDependencies=no
After=envd.service
Before=e2b-test-probe.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /run/e2b-test/bench-memory.sh
TimeoutStartSec=infinity
"""

# In the guest. Reports "E2B-PROBE bench_*=" lines like the boot probe.
SCRIPT = r"""set -u
out=/dev/ttyS1
report() { printf 'E2B-PROBE %s=%s\n' "$1" "$2" > "$out"; }
report_b64() { report "$1" "$(printf '%s' "$2" | base64 -w0)"; }
avail() { awk '/^MemAvailable:/{print $2}' /proc/meminfo; }
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
fi
"""


def add_bench_unit(wait):
    original = vm.build_payload

    def build_payload(dest, variant, kin, ci_tries):
        original(dest, variant, kin, ci_tries)
        units = dest / "systemd" / "system"
        (units / "e2b-bench-memory.service").write_text(UNIT)
        (units / "multi-user.target.wants" / "e2b-bench-memory.service").symlink_to(
            "../e2b-bench-memory.service")
        (dest / "e2b-test" / "bench-memory.sh").write_text(f"WAIT={int(wait)}\n" + SCRIPT)

    vm.build_payload = build_payload


def mib(kib):
    return f"{int(kib) / 1024:.0f} MiB" if kib else "n/a"


def b64(report, key):
    """A *_b64 value: vm.parse_report has decoded it and dropped the suffix."""
    return report.get(key[:-len("_b64")], "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rootfs", nargs="?", type=pathlib.Path, default=ROOT / "out/e2b-ci/rootfs.ext4")
    ap.add_argument("--sizes", default="512,1024", help="guest MiB, comma-separated")
    ap.add_argument("--wait", type=float, default=600, help="seconds to wait for the stack")
    a = ap.parse_args()
    if not a.rootfs.exists():
        print(f"e2b-ci-vm-memory: {a.rootfs}: no image; run `make flavor=e2b-ci` first (skipped)")
        return 0
    add_bench_unit(a.wait)
    print(f"e2b-ci guest memory: {a.rootfs}, load {' '.join(open('/proc/loadavg').read().split()[:3])}")
    for mem in (int(s) for s in a.sizes.split(",")):
        cpus = 1 if mem <= 512 else 2
        res = vm.boot(vm.Variant("e2b-ci", f"bench-{mem}m", cpus, mem), a.rootfs, timeout=a.wait + 480)
        r = res.get("report", {})
        idle, imported = r.get("bench_idle_avail_kb"), r.get("bench_import_avail_kb")
        print(f"\n== {cpus} vCPU, {mem} MiB ({res.get('accel')}), host wall {res.get('host_wall_s')} s,"
              f" load {' '.join(open('/proc/loadavg').read().split()[:3])}")
        if res.get("error"):
            print(f"   boot: {res['error']}")
        print(f"   stack up: {'yes' if r.get('bench_up') == '1' else 'NO'}"
              f" at {r.get('bench_up_uptime_s', '?')} s uptime; python kernels: {r.get('bench_kernels', '?')};"
              f" NRestarts jupyter/code-interpreter: {b64(r, 'bench_restarts_b64').strip()}")
        print(f"   MemTotal {mib(r.get('bench_mem_total_kb'))}; MemAvailable idle: {mib(idle)}"
              f"; after `import pandas, matplotlib`: {mib(imported)}")
        if mem == 512 and idle:
            ok = int(idle) >= GOAL_KIB
            print(f"   goal MemAvailable >= 200 MiB on small: {'met' if ok else 'NOT met'}"
                  f" (ratio {int(idle) / GOAL_KIB:.2f}; reference deployment ~90 MiB)")
        print("   largest processes, idle (PSS):")
        for line in b64(r, "bench_idle_pss_b64").splitlines():
            print(f"     {line}")
        if imported:
            print(f"   import result: {b64(r, 'bench_import_b64')[:200]}")
    return 0


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("e2b-ci-vm-memory: needs root (network namespace, tap)")
    sys.exit(main())
