#!/usr/bin/env bash
# The clone step's round trip (e2b-hostlink clone) against a warmup round
# trip (e2b-hostlink wait) on the same hybrid-vsock stand-in socket, into a
# real e2b-rt guest under QEMU. See bench/clone_bench.py and bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec flock /work/.qemu.lock /usr/bin/python3 bench/clone_bench.py "$@"
