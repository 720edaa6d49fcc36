#!/usr/bin/env bash
# The clone step's round trip (e2b-hostlink clone) against a warmup round
# trip (e2b-hostlink wait) on the same hybrid-vsock stand-in socket, into a
# real e2b-rt guest under QEMU. See bench/clone_bench.py and bench/README.md.
# With BENCH_QEMU_LOCK=FILE the run holds an flock on FILE, so the boots of
# other processes that take the same lock wait (one QEMU at a time).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${BENCH_QEMU_LOCK:-}" ]; then
	exec flock "$BENCH_QEMU_LOCK" /usr/bin/python3 bench/clone_bench.py "$@"
fi
exec /usr/bin/python3 bench/clone_bench.py "$@"
