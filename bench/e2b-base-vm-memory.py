#!/usr/bin/python3
"""Bench (issue 50): MemAvailable of e2b-base against e2b-rt, idle in a 512 MiB guest.

Boots each rootfs.ext4 with tests/boot/vm.py's harness (kernel, initramfs,
qcow2 overlay, private network namespace; removed on exit) at the pool's
size (512 MiB, the flavor's vCPUs from os-image/flavors.json), the two
images alternating, ROUNDS boots each. A bench-only unit, added to the
boot's test payload under /run and ordered before the boot probe, waits
until envd answers /health, lets the guest idle IDLE seconds, then reads
/proc/meminfo, the largest processes' PSS and the running services.

    bench/e2b-base-vm-memory.py [--rounds N] [--idle S] [--wait S] [--mem MiB] BASE_ROOTFS PEER_ROOTFS

Target (issue 50): e2b-base's MemAvailable within 10 MiB of e2b-rt's (the
peer), medians of the rounds. Run by bench/e2b-base.sh, which holds the
machine's QEMU lock (flock) around the whole run; needs root (netns, tap).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "boot"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))
import guest_bench  # noqa: E402
import vm  # noqa: E402

TARGET_MIB = 10
FIELDS = ["MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem", "AnonPages",
          "Slab", "SReclaimable", "SUnreclaim", "KernelStack", "PageTables"]

DESCRIPTION = "guest memory once envd answers, after an idle period"

# In the guest. Reports "E2B-PROBE bench_*=" lines like the boot probe.
SCRIPT = r"""up=0
start=$(cut -d. -f1 /proc/uptime)
while [ $(( $(cut -d. -f1 /proc/uptime) - start )) -lt "$WAIT" ]; do
	curl -sf -o /dev/null --max-time 5 http://127.0.0.1:49983/health && { up=1; break; }
	sleep 1
done
report bench_up "$up"
report bench_up_uptime_s "$(cut -d' ' -f1 /proc/uptime)"
sleep "$IDLE"
report bench_idle_uptime_s "$(cut -d' ' -f1 /proc/uptime)"
report_b64 bench_meminfo_b64 "$(cat /proc/meminfo)"
pss() {
	local d p cmd
	for d in /proc/[0-9]*; do
		p=$(awk '/^Pss:/{print $2}' "$d/smaps_rollup" 2>/dev/null)
		cmd=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null | cut -c1-60)
		[ -n "$p" ] && [ -n "$cmd" ] && printf '%s KiB %s\n' "$p" "$cmd"
	done | sort -rn
}
all=$(pss)
report bench_pss_total_kb "$(printf '%s\n' "$all" | awk '{s+=$1} END{print s+0}')"
report bench_processes "$(printf '%s\n' "$all" | grep -c .)"
report_b64 bench_pss_b64 "$(printf '%s\n' "$all" | head -n 10)"
report_b64 bench_running_b64 "$(systemctl list-units --type=service --state=running --no-legend --plain | awk '{print $1}')"
"""


def add_bench_unit(wait: float, idle: float) -> None:
    """vm.build_payload, plus the bench unit and its script (bench/lib/guest_bench.py)."""
    guest_bench.add_bench_unit(DESCRIPTION, f"WAIT={int(wait)}\nIDLE={int(idle)}\n" + SCRIPT)


def load() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def meminfo(report: dict) -> dict:
    """{field: KiB} from the guest's /proc/meminfo (decoded by vm.parse_report)."""
    got = {}
    for line in report.get("bench_meminfo", "").splitlines():
        name, _, rest = line.partition(":")
        if rest.split():
            got[name] = int(rest.split()[0])
    return got


def mib(kib) -> str:
    return f"{kib / 1024:.1f} MiB"


def boot_once(flavor: str, rootfs: pathlib.Path, cpus: int, mem: int, wait: float, idle: float,
              label: str) -> dict:
    """One boot; prints its figures and returns {meminfo, report, ...}."""
    add_bench_unit(wait, idle)
    res = vm.boot(vm.Variant(flavor, f"bench-{mem}m", cpus, mem), rootfs, timeout=wait + idle + 600)
    r = res.get("report", {})
    m = meminfo(r)
    print(f"\n== {label}: {flavor} ({rootfs}), {cpus} vCPU, {mem} MiB ({res.get('accel')}),"
          f" host wall {res.get('host_wall_s')} s, load {load()}", flush=True)
    if res.get("error"):
        print(f"   boot: {res['error']}")
    print(f"   envd /health: {'yes' if r.get('bench_up') == '1' else 'NO'} at {r.get('bench_up_uptime_s', '?')} s"
          f" uptime; read at {r.get('bench_idle_uptime_s', '?')} s (idle {int(idle)} s)")
    if m:
        print("   " + ", ".join(f"{f} {mib(m[f])}" for f in FIELDS if f in m))
        print(f"   user-space PSS in all: {mib(int(r.get('bench_pss_total_kb', 0)))}"
              f" in {r.get('bench_processes', '?')} processes; the largest:")
        for line in r.get("bench_pss", "").splitlines():
            print(f"     {line}")
    else:
        print("   no /proc/meminfo from the guest (the bench unit did not report)")
    return {"flavor": flavor, "meminfo": m, "up": r.get("bench_up") == "1",
            "running": set(r.get("bench_running", "").split()), "load": load()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", type=pathlib.Path, help="e2b-base's rootfs.ext4")
    ap.add_argument("peer", type=pathlib.Path, help="e2b-rt's rootfs.ext4 (the peer)")
    ap.add_argument("--rounds", type=int, default=1, help="boots of each image, alternating")
    ap.add_argument("--idle", type=float, default=60, help="seconds idle after envd answers")
    ap.add_argument("--wait", type=float, default=300, help="seconds to wait for envd's /health")
    ap.add_argument("--mem", type=int, default=512, help="guest MiB")
    ap.add_argument("--cpus", type=int, help="guest vCPUs (default: e2b-base's vcpu in os-image/flavors.json)")
    a = ap.parse_args()
    for rootfs in (a.base, a.peer):
        if not rootfs.is_file():
            print(f"e2b-base-vm-memory: {rootfs}: no image (build it with make image first)", file=sys.stderr)
            return 1
    cpus = a.cpus or json.loads((ROOT / "os-image" / "flavors.json").read_text())["e2b-base"]["vcpu"]
    images = {"e2b-base": a.base, "e2b-rt": a.peer}
    print(f"e2b-base guest memory: {a.base} against {a.peer}, {a.rounds} boot(s) each, alternating;"
          f" {cpus} vCPU, {a.mem} MiB, idle {int(a.idle)} s after envd answers; load {load()}", flush=True)
    got = {"e2b-base": [], "e2b-rt": []}
    for i in range(a.rounds):
        order = ["e2b-rt", "e2b-base"] if i % 2 == 0 else ["e2b-base", "e2b-rt"]
        for flavor in order:
            got[flavor].append(boot_once(flavor, images[flavor], cpus, a.mem, a.wait, a.idle,
                                         f"round {i + 1}"))
    failed = [f"{g['flavor']}" for runs in got.values() for g in runs
              if not g["up"] or "MemAvailable" not in g["meminfo"]]
    if failed:
        print(f"\ne2b-base-vm-memory: no idle figure from {', '.join(failed)}"
              " (envd never answered /health, or the bench unit did not report; see above)", file=sys.stderr)
        return 1

    def median(flavor, field):
        return statistics.median(g["meminfo"].get(field, 0) for g in got[flavor])

    base, peer = median("e2b-base", "MemAvailable"), median("e2b-rt", "MemAvailable")
    diff = (base - peer) / 1024
    each = {f: ", ".join(mib(g["meminfo"]["MemAvailable"]) for g in got[f]) for f in got}
    print(f"\nmemory: MemAvailable idle, {a.mem} MiB guest, median of {a.rounds}: e2b-base {mib(base)}"
          f" ({each['e2b-base']}), e2b-rt (peer) {mib(peer)} ({each['e2b-rt']}), load {load()}")
    print(f"memory: difference e2b-base - e2b-rt: {diff:+.1f} MiB, ratio {base / peer:.3f}"
          f" (target: within {TARGET_MIB} MiB: {'met' if abs(diff) <= TARGET_MIB else 'NOT met'})")
    print("memory: where it differs (medians, e2b-base - e2b-rt): "
          + ", ".join(f"{f} {(median('e2b-base', f) - median('e2b-rt', f)) / 1024:+.1f} MiB"
                      for f in FIELDS if f not in ("MemTotal", "MemAvailable")))
    extra = set.union(*(g["running"] for g in got["e2b-base"])) - set.union(*(g["running"] for g in got["e2b-rt"]))
    missing = set.union(*(g["running"] for g in got["e2b-rt"])) - set.union(*(g["running"] for g in got["e2b-base"]))
    print(f"memory: services running only in e2b-base: {' '.join(sorted(extra)) or 'none'};"
          f" only in e2b-rt: {' '.join(sorted(missing)) or 'none'}")
    return 0


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit("e2b-base-vm-memory: needs root (network namespace, tap)")
    sys.exit(main())
