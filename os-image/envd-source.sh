#!/usr/bin/env bash
# Build envd from its pinned source, reproducibly, once per pin (envd=source).
#
#   envd-source.sh LOCK NAME OUTPUT INFO [PINFETCH-OPTION...]
#
# LOCK's stanza NAME pins e2b-dev/infra by its unpacked tree (tree_sha256),
# with the tag's version and commit. The tree comes through pinfetch, with the
# options the other pinned artifacts get (build.sh's: --cache, --mirror,
# --offline), and is verified before Go sees it; envd is built from
# packages/envd with upstream's flags, one pinned Go toolchain (GOTOOLCHAIN)
# and modules from the module proxy checked by go.sum (-mod=readonly). The
# binary and its build record are cached under CACHE/envd-source/<key>, the
# key being a hash of everything that decides the bytes, so a warm rebuild
# only copies. OUTPUT gets the binary (0755); INFO the record (JSON): the
# source pin, the Go version and every module with its version and hash,
# as `go version -m` prints them.
#
# Environment (set by os-image/image.mk): TOOLS CACHE GO_TOOLCHAIN PYTHON,
# and OFFLINE (empty: 0); ENVD_SOURCE_CACHE (default
# CACHE/envd-source) holds the built binaries, so that `make repro` can
# compile envd once per build and compare. The Go module proxy and checksum
# database are the machine's own (go env: GOPROXY, GOSUMDB); offline=1 sets
# GOPROXY=off, so the toolchain and the modules must be in CACHE/go/mod.
set -euo pipefail

die() { echo "envd-source: $*" >&2; exit 1; }
say() { echo "envd-source: $*" >&2; }

[ $# -ge 4 ] || die "usage: envd-source.sh LOCK NAME OUTPUT INFO [PINFETCH-OPTION...]"
lock=$1 name=$2 output=$3 info=$4
shift 4
pinargs=("$@")
for v in TOOLS CACHE GO_TOOLCHAIN PYTHON; do
    [ -n "${!v:-}" ] || die "$v is not set: build through make (os-image/image.mk)"
done

field() { "$TOOLS/pinfetch" --lock "$lock" --name "$name" --field "$1"; }
version=$(field version) || die "$lock: cannot read [$name] (see above)"
commit=$(field commit 2>/dev/null) || die "$lock: [$name] has no commit: a source pin records the commit its tree is of"
tree=$(field tree_sha256 2>/dev/null) || die "$lock: [$name] has no tree_sha256: envd's source is pinned by its unpacked tree"
url=$(field url)

case "$GO_TOOLCHAIN" in
    go1.[0-9]*.[0-9]*) ;;
    *) die "go_toolchain=$GO_TOOLCHAIN: expected a release such as go1.26.8 (GOTOOLCHAIN's form)" ;;
esac

# The cache key: the pin, the toolchain, and this script (its flags and
# environment): change any of them, and the key changes with it.
key=$(printf '%s\n' "tree=$tree" "commit=$commit" "go=$GO_TOOLCHAIN" "script=$(sha256sum < "$0" | cut -d' ' -f1)" |
      sha256sum | cut -c1-32)
store=${ENVD_SOURCE_CACHE:-$CACHE/envd-source}
cached=$store/$key

install_from_cache() {
    install -D -m 0755 "$cached/envd" "$output.tmp.$$" && mv -f "$output.tmp.$$" "$output"
    install -m 0644 "$cached/build.json" "$info"
}

# The shared cache's commands (regcache/README.md), from this checkout.
top=$(cd "$(dirname "$0")/.." && pwd)
regcache() { PYTHONPATH="$top" "$PYTHON" -m regcache "$@"; }

# A stored build is taken only as its record names the bytes it describes.
cached_ok() {
    [ -f "$cached/envd" ] && [ -f "$cached/build.json" ] || return 1
    local want
    want=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$cached/build.json" 2>/dev/null || true)
    [ -n "$want" ] && [ "$(sha256sum < "$cached/envd" | cut -d' ' -f1)" = "$want" ]
}

if cached_ok; then
    say "envd $version from the cache ($cached: source $tree, $GO_TOOLCHAIN)"
    install_from_cache
    regcache got envd local
    regcache envd-push "$key" "$cached"
    exit 0
fi
if [ -e "$cached" ]; then
    say "the cached envd in $cached does not match its record; building it again"
    rm -rf "$cached"
fi
# Another build host's, through the shared cache's registry (make
# cache_registry=); not for `make repro`, which compiles envd in each build.
if [ "${OFFLINE:-0}" != 1 ] && [ "${CACHE_REGISTRY_ENVD:-1}" = 1 ] && regcache envd-pull "$key" "$cached"; then
    if cached_ok; then
        say "envd $version from the shared cache's registry (key $key), into $cached"
        install_from_cache
        regcache got envd registry
        exit 0
    fi
    say "the registry's envd $key does not match its own record; building it"
    rm -rf "$cached"
fi

# A go that can switch toolchains (1.21+); it fetches $GO_TOOLCHAIN itself.
here=$(cd "$(dirname "$0")" && pwd)
go=$(bash "$here/../mk/find-go.sh") || die "no Go to build envd with: install Go 1.21 or newer (make deps does)"
mkdir -p "$store" "$CACHE/go/mod"
work=$(mktemp -d "$store/.build.XXXXXX")
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# 1. The source tree, verified against the pin.
if ! regcache pinfetch -- "$TOOLS/pinfetch" --lock "$lock" --name "$name" --output "$work/src" "${pinargs[@]}"; then
    die "envd's source [$name] ($url, tree_sha256 $tree) could not be had or did not verify; stopping before mkosi.
envd-source: supply a copy of the tag's archive with pin_mirror=PREFIX (PREFIX/tree/<hex of the tree pin>; a \`git archive\` of commit $commit verifies),
envd-source: offline=1 with a filled cache ($CACHE/pinfetch), or envd=release for the pinned release binary."
fi
[ -f "$work/src/packages/envd/go.mod" ] || die "[$name]: the verified tree has no packages/envd/go.mod: the pin names another repository"

# 2. The toolchain, on its own first, so that its failure is named as such.
export GOTOOLCHAIN=$GO_TOOLCHAIN GOWORK=off CGO_ENABLED=0 GOOS=linux GOARCH=amd64 GOAMD64=v1 \
       GOEXPERIMENT= GOFLAGS="-mod=readonly -modcacherw" GOMODCACHE=$CACHE/go/mod \
       GOCACHE=$work/gocache GOTELEMETRY=off
[ "${OFFLINE:-0}" = 1 ] && export GOPROXY=off
if ! got=$(cd "$work/src/packages/envd" && "$go" env GOVERSION 2>"$work/go.err"); then
    die "Go toolchain $GO_TOOLCHAIN cannot be had: $(tail -n 3 "$work/go.err" | tr '\n' ' ')
envd-source: remedies: reach the Go module proxy (go env GOPROXY: $(GOTOOLCHAIN=local "$go" env GOPROXY)), install Go $GO_TOOLCHAIN,
envd-source: set go_toolchain= to a release the proxy has, or build once online and then use offline=1 (the toolchain is kept in $CACHE/go/mod)."
fi
[ "$got" = "$GO_TOOLCHAIN" ] || die "GOTOOLCHAIN=$GO_TOOLCHAIN gave $got: envd's go.mod asks for a newer Go; raise go_toolchain="

# 3. The build, with upstream's flags (packages/envd/Makefile, `make build`).
# Modules come through the proxy and are checked against go.sum.
say "building envd $version from $commit with $GO_TOOLCHAIN (modules in $GOMODCACHE)"
if ! (cd "$work/src/packages/envd" &&
      "$go" build -trimpath -buildvcs=false -a -o "$work/envd" \
          -ldflags="-X=main.commitSHA=$commit -s -w -buildid=" .) > "$work/build.log" 2>&1; then
    if grep -q 'SECURITY ERROR\|checksum mismatch\|verifying .*: ' "$work/build.log"; then
        die "a Go module does not match envd's go.sum; nothing was built:
$(grep -m 3 'verifying\|downloaded:\|go.sum:' "$work/build.log")
envd-source: the module proxy (go env GOPROXY) served other bytes than upstream pinned. Use a proxy you trust;
envd-source: a bad copy in the module cache goes with \`go clean -modcache\` (GOMODCACHE=$GOMODCACHE)."
    fi
    if [ "${OFFLINE:-0}" = 1 ] && grep -q 'GOPROXY=off\|module lookup disabled' "$work/build.log"; then
        die "offline=1, but a Go module envd needs is not in $GOMODCACHE:
$(grep -m 3 'GOPROXY=off\|module lookup disabled' "$work/build.log")
envd-source: build once online with the same cache= to fill it."
    fi
    die "go build of envd failed:
$(tail -n 15 "$work/build.log")"
fi
built=$("$work/envd" -version 2>/dev/null) || die "the envd built from $commit does not run \`envd -version\`"
[ "$built" = "$version" ] || die "the envd built from $commit says it is $built, but [$name] in $lock says $version"

# 4. The record: the source pin, the Go version, every module and its hash.
"$go" version -m -json "$work/envd" > "$work/buildinfo.json"
"$PYTHON" - "$work/buildinfo.json" "$work/envd" "$name" "$version" "$commit" "$url" "$tree" "$key" \
    > "$work/build.json" <<'EOF'
import hashlib, json, sys
bi_path, binary, name, version, commit, url, tree, key = sys.argv[1:]
bi = json.load(open(bi_path))
mods = [{"path": d["Path"], "version": d["Version"], **({"sum": d["Sum"]} if d.get("Sum") else {}),
         **({"replace": d["Replace"]["Path"]} if d.get("Replace") else {})}
        for d in bi.get("Deps", [])]
print(json.dumps({
    "sha256": hashlib.sha256(open(binary, "rb").read()).hexdigest(),
    "built_from": {"name": name, "version": version, "commit": commit, "url": url, "tree_sha256": tree},
    "go": bi["GoVersion"],
    "main": bi["Path"],
    "modules": mods,
    "build_settings": {s["Key"]: s["Value"] for s in bi.get("Settings", [])},
    "cache_key": key,
}, sort_keys=True, indent=1))
EOF
install -D -m 0755 "$work/envd" "$work/entry/envd"
mv "$work/build.json" "$work/entry/build.json"
# Another build of the same key may have won the race: its bytes are the same.
mv -T "$work/entry" "$cached" 2>/dev/null || [ -f "$cached/envd" ] || die "cannot store the build in $cached"
say "envd $version built: sha256 $(cut -d' ' -f1 < <(sha256sum "$cached/envd")), cached in $cached"
install_from_cache
regcache got envd built
regcache envd-push "$key" "$cached"
