#!/usr/bin/env bash
# E2B fromImage build figures (issue 39): a template on a registry image,
# built cold (the image not in the cache, so it is pulled), against builder
# mode on the same image from a local OCI layout (the peer: the same base,
# unpacked and given e2b-rt's runtime, without the registry), alternated,
# median of BENCH_RUNS (3). The registry is Debian's docker-registry on
# loopback with TLS and htpasswd (bench/lib/registry.py); the image is the
# tests' Debian trixie base (tests/builder/bases.py), pushed as
# library/python:3.13. The template: from_image(it), one RUN step and a
# start command, its JSON written by E2B's Python SDK.
# The template's build is split by phase from the build log's timestamps:
# pull (resolve and pull, to the base's unpacking), unpack (to mkosi),
# runtime (mkosi up to the steps), steps, finalize, pack.
# Prints the medians, every run, the ratio and the load.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${BENCH_RUNS:-3}
tmp=$(mktemp -d /var/tmp/e2b-bench-from-image.XXXXXX)
reg=
cleanup() { [ -z "$reg" ] || kill "$reg" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

. bench/lib/test-recipes.sh
sdk=$(/usr/bin/python3 -c 'import sys; sys.path[:0] = ["tests", "tests/sdk"]; import sdk_helpers; print(sdk_helpers.py_sdk())')
mkdir "$tmp/registry"
/usr/bin/python3 bench/lib/registry.py "$tmp/registry" > "$tmp/registry.env" &
reg=$!
for _ in $(seq 1 600); do [ -s "$tmp/registry.env" ] && break; sleep 0.5; done
[ -s "$tmp/registry.env" ] || { echo "e2b-from-image: the registry did not start" >&2; exit 1; }
eval "$(cat "$tmp/registry.env")"
mkdir "$tmp/from-image"
cat > "$tmp/from-image/template.py" <<PY
from e2b import Template
t = (Template().from_image("$image")
     .run_cmd('echo "from \$(cat /etc/debian_version)" > ~/base.txt')
     .set_start_cmd("sleep infinity", "test -s /home/user/base.txt"))
print(Template.to_json(t))
PY
(cd "$tmp/from-image" && "$sdk" template.py > e2b.template.json)

export REGISTRY_AUTH_FILE=$auth
. bench/lib/stamped-build.sh
phases() {
    /usr/bin/python3 bench/lib/phases.py "$1" pull "unpacking and checking it" unpack "base: .* = .*@sha256:" \
        runtime "template\.postinst" steps "Running finalize script" finalize "Normalizing modification times" pack
}

# The package and mkosi caches warm (the first build of each kind fills
# them); only the pull is cold: its digest's entry is removed before each run.
load0=$(cut -d' ' -f1-3 /proc/loadavg)
build "$tmp/fill-peer.log" cert_dir="$certs" flavor=e2b-rt base="$layout" > /dev/null
build "$tmp/fill-tmpl.log" cert_dir="$certs" template="$tmp/from-image" > /dev/null
peer=() tmpl=() split=
for i in $(seq 1 "$runs"); do
    # The pulled image's place in the cache: by repository and digest (template/e2b/pull.py).
    pulled=$(/usr/bin/python3 -c 'import json, sys, urllib.parse
lock = json.load(open(sys.argv[1]))
print("out/cache/e2b-images/" + urllib.parse.quote(lock["name"], safe="") + "/" + lock["digest"].replace(":", "-"))' \
        "$tmp/from-image/e2b.template.lock")
    rm -rf "$pulled" "$tmp/from-image/e2b.template.lock"
    tmpl+=("$(build "$tmp/t.log" cert_dir="$certs" template="$tmp/from-image")")
    [ -n "$split" ] || split=$(phases "$tmp/t.log")
    peer+=("$(build "$tmp/p.log" flavor=e2b-rt base="$layout")")
done
p=$(median "${peer[@]}")
t=$(median "${tmpl[@]}")
size=$(du -sb "$pulled" | cut -f1)
echo "e2b-from-image: $(nproc) cores, load before $load0, after $(cut -d' ' -f1-3 /proc/loadavg)"
echo "e2b-from-image: base $image, $((size / 1048576)) MiB pulled"
echo "e2b-from-image: builder mode on it from a local layout (peer): ${p} s  (runs: ${peer[*]})"
echo "e2b-from-image: fromImage template, cold pull:                 ${t} s  (runs: ${tmpl[*]}; first: $split)"
echo "e2b-from-image: ratio template / builder mode: $(/usr/bin/python3 -c "print(f'{$t / $p:.2f}')")"
