#!/usr/bin/env bash
# e2b-hostlink forward against socat doing the same hop, and the relays' idle
# memory. See bench/hostlink_bench.py and bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
exec /usr/bin/python3 bench/hostlink_bench.py "$@"
