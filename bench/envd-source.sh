#!/usr/bin/env bash
# envd=source against envd=release (issue 17):
#  - warm rebuild of e2b-rt with envd built from source (cached by its pin)
#    against the same rebuild with the pinned release binary (the named peer;
#    upstream's release cannot be downloaded here, so the real envd is served
#    from loopback as that binary), alternately, BENCH_RUNS (3) each: median
#    ratio, goal <= 1.1;
#  - the cold envd build: from an empty module cache (toolchain and modules
#    through the module proxy), and with the modules cached but no binary.
# The load average is printed with every figure.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 - "$@" <<'PY'
import os, pathlib, shutil, statistics, subprocess, sys, tempfile, time
sys.path.insert(0, "tests")
import testimages as t

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])
src = t.sources()
tmp = pathlib.Path(tempfile.mkdtemp(prefix="e2b-bench-envd-"))
try:
    release = t.write_envd_lock(tmp / "release", src.served.url("envd"), src.envd_sha256, src.envd_version)
    cases = {
        "envd=source": (t.SHIPPED_RECIPES, ["envd=source", *src.make_args("e2b-rt")]),
        "envd=release (peer)": (release, ["envd=release"]),
    }
    out = t.ROOT / "out" / "bench-envd"
    for name, (recipes, args) in cases.items():  # fill every cache, untimed
        cp = t.make("e2b-rt", out, "image", *args, recipes=recipes)
        if cp.returncode != 0:
            sys.exit(f"envd-source: {name} build failed:\n{cp.stderr[-3000:]}")
    times = {name: [] for name in cases}
    for _ in range(RUNS):
        for name, (recipes, args) in cases.items():
            cp = t.make("e2b-rt", out, "image", *args, recipes=recipes)
            if cp.returncode != 0:
                sys.exit(f"envd-source: {name} rebuild failed:\n{cp.stderr[-3000:]}")
            times[name].append(cp.seconds)
            print(f"envd-source: warm rebuild {name}: {cp.seconds:.1f} s (load {load()})", flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"envd-source: {os.cpu_count()} cores; median warm rebuild: source {med['envd=source']:.1f} s, "
          f"release {med['envd=release (peer)']:.1f} s; ratio source/release "
          f"{med['envd=source'] / med['envd=release (peer)']:.3f} (goal <= 1.1)")
    shutil.rmtree(out, ignore_errors=True)

    # The cold envd build, outside make: an empty module cache, then cached modules.
    for label, seed in (("empty module cache", False), ("modules cached, no binary", True)):
        cache = tmp / f"cache-{int(seed)}"
        cache.mkdir()
        if seed:
            (cache / "go").symlink_to(t.CACHE / "go")
        t0 = time.monotonic()
        t.build_envd_from_source(src.mirror, tmp / f"envd-{int(seed)}", cache=cache)
        secs = time.monotonic() - t0
        same = t.sha256_file(tmp / f"envd-{int(seed)}") == src.envd_sha256
        print(f"envd-source: cold envd build ({label}): {secs:.1f} s, same bytes as the session's: {same} "
              f"(load {load()})")
        if not seed:
            subprocess.run(["chmod", "-R", "u+w", str(cache)], check=False)
finally:
    src.close()
    shutil.rmtree(tmp, ignore_errors=True)
PY
