#!/usr/bin/env bash
# Stage e2b-ci's javascript kernel (ijavascript, serving js and ts) into the
# extra tree, on the build host, before mkosi. Called by prepare.sh when the
# javascript kernel is chosen.
#
# Environment:
#   EXTRA       the extra tree to stage into
#   WORK        scratch directory (may hold a previous run's files)
#   TOOLS       build/ (pinfetch)
#   RECIPES     recipes/ (ijavascript.lock, ijavascript/package{,-lock}.json)
#   CACHE       the build cache: $CACHE/pinfetch and $CACHE/npm
#   PIN_MIRROR  space-separated pinfetch mirror prefixes (optional)
#   OFFLINE     1: everything from the caches (pinfetch --offline, npm --offline)
#
# Steps: fetch and verify the three tree pins of recipes/ijavascript.lock;
# check that recipes/ijavascript/package.json still matches the pinned tree;
# `npm ci` from the lock (every tarball checked against its integrity; the
# registry is the machine's npm configuration); lay out
#   /usr/lib/e2b-code-interpreter/ijavascript/{lib,LICENSE,package.json,node_modules}
#   /usr/local/share/jupyter/kernels/javascript/{kernel.json,logo-*.png}
#   /usr/share/doc/e2b-code-interpreter/ijavascript.json   (what was staged)
# zeromq's native addon is not built here: its source (binding.gyp, src,
# scripts/prepare.js) and nan stay in node_modules for the image build, which
# compiles build/Release/zmq.node against Debian's libzmq inside mkosi.
# Everything is staged in WORK and moved into EXTRA at the end, so a failure
# leaves EXTRA as it was.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
termsafe() { PYTHONPATH="$here/../.." /usr/bin/python3 -m sandbox.termsafe "$@"; }
lockpy=$here/ijavascript-lock.py
die() { printf 'ijavascript: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'ijavascript: %s\n' "$*" >&2; }

for v in EXTRA WORK TOOLS RECIPES CACHE; do
    [ -n "${!v:-}" ] || die "$v is not set (see the header of $0)"
done
lock=$RECIPES/ijavascript.lock
[ -f "$lock" ] || die "$lock: not found (recipes=$RECIPES)"
for f in package.json package-lock.json; do
    [ -f "$RECIPES/ijavascript/$f" ] ||
        die "$RECIPES/ijavascript/$f: not found; run os-image/e2b-ci/ijavascript-lock.py"
done

npm_version=$(npm --version 2>/dev/null) || die "npm not found on the build host: install npm (make deps)"
[ "${npm_version%%.*}" -ge 9 ] 2>/dev/null ||
    die "npm $npm_version on the build host is too old (lockfile v3 and --install-links need npm >= 9): install npm (make deps)"

dest=/usr/lib/e2b-code-interpreter/ijavascript
spec=/usr/local/share/jupyter/kernels/javascript
doc=/usr/share/doc/e2b-code-interpreter/ijavascript.json
stage=$WORK/ijavascript-stage
rm -rf "$stage"
mkdir -p "$stage/trees" "$stage/app/vendor" "$stage/out"

# 1. The three trees, each verified against its tree pin.
pinargs=(--cache "$CACHE/pinfetch" --quiet)
for m in ${PIN_MIRROR:-}; do pinargs+=(--mirror "$m"); done
[ "${OFFLINE:-0}" = 1 ] && pinargs+=(--offline)
for name in ijavascript nel ijavascript-babel; do
    if ! "$TOOLS/pinfetch" --lock "$lock" --name "$name" --output "$stage/trees/$name" "${pinargs[@]}"; then
        url=$("$TOOLS/pinfetch" --lock "$lock" --name "$name" --field url 2>/dev/null || echo '?')
        if [ "${OFFLINE:-0}" = 1 ]; then hint="offline=1 takes it from $CACHE/pinfetch (run once online to fill it) or a file:// pin_mirror"
        else hint="supply it with pin_mirror=PREFIX (PREFIX/tree/<hex of the tree pin>), or offline=1 with a filled cache"; fi
        die "pin [$name] of $lock ($url) could not be fetched or did not verify against its tree_sha256 (pinfetch's message above); $hint"
    fi
done

# 2. Our package.json and lock still describe the pinned tree.
"$lockpy" --check --trees "$stage/trees" --recipes "$RECIPES" >/dev/null ||
    die "$RECIPES/ijavascript does not match the pinned ijavascript tree (above); run os-image/e2b-ci/ijavascript-lock.py"

# 3. The npm closure, from the lock.
app=$stage/app
cp -a "$stage/trees/ijavascript/lib" "$stage/trees/ijavascript/LICENSE" "$app/"
cp "$RECIPES/ijavascript/package.json" "$RECIPES/ijavascript/package-lock.json" "$app/"
cp -a "$stage/trees/nel" "$app/vendor/nel"
cp -a "$stage/trees/ijavascript-babel" "$app/vendor/ijavascript-babel"
npmargs=(--ignore-scripts --omit=dev --install-links --no-audit --no-fund --no-update-notifier
         --cache "$CACHE/npm")
[ "${OFFLINE:-0}" = 1 ] && npmargs+=(--offline)
mkdir -p "$CACHE/npm"
if ! (cd "$app" && npm ci "${npmargs[@]}") > "$stage/npm.log" 2>&1; then
    if msg=$("$lockpy" --explain-npm "$stage/npm.log" --recipes "$RECIPES" --npm-cache "$CACHE/npm"); then
        die "npm: $(termsafe "$msg")"
    fi
    termsafe < "$stage/npm.log" | grep -v '^npm warn' >&2 || true
    die "npm ci failed in $app (its output above)"
fi

# 4. The kernel's tree, without what a kernel never needs.
out=$stage/out
mkdir -p "$out$dest"
cp -a "$app/lib" "$app/LICENSE" "$app/package.json" "$app/node_modules" "$out$dest/"
nm=$out$dest/node_modules
for d in nel ijavascript-babel; do
    [ -d "$nm/$d" ] && [ ! -L "$nm/$d" ] || die "npm left node_modules/$d as a link, not a directory (npm $npm_version)"
done
# zeromq 5's prebuilt addons fit no Node 20 (ABI 115), windows/ is a Windows
# libzmq; .bin and npm's hidden lock are for npm, not for the kernel.
rm -rf "$nm/zeromq/prebuilds" "$nm/zeromq/windows" "$nm/zeromq/build" "$nm/.bin" "$nm/.package-lock.json"
[ -f "$nm/zeromq/binding.gyp" ] && [ -f "$nm/nan/package.json" ] ||
    die "node_modules has no zeromq/binding.gyp or nan: the lock no longer brings what zmq.node is built from"

# 5. The kernelspec, as `ijsinstall --install=global` writes it, with absolute paths.
mkdir -p "$out$spec"
printf '%s\n' '{"argv": ["/usr/bin/node", "'"$dest"'/lib/kernel.js", "--hide-undefined", "{connection_file}", "--protocol=5.1"], "display_name": "JavaScript (Node.js)", "language": "javascript"}' \
    > "$out$spec/kernel.json"
for size in 32x32 64x64; do
    logo=$stage/trees/ijavascript/images/nodejs/js-green-$size.png
    [ -f "$logo" ] || die "$logo: not in the pinned ijavascript tree (ijsinstall copies it)"
    cp "$logo" "$out$spec/logo-$size.png"
done

# 6. What was staged, for the manifest.
mkdir -p "$out$(dirname "$doc")"
"$lockpy" --recipes "$RECIPES" --record "$out$doc"
chmod -R u=rwX,go=rX "$out"

# Into EXTRA: replace a previous run's files.
for p in "$dest" "$spec" "$doc"; do
    rm -rf "${EXTRA:?}$p"
    mkdir -p "$EXTRA$(dirname "$p")"
    mv "$out$p" "$EXTRA$p"
done
rm -rf "$stage"
say "staged $dest ($(sed -n 's/.*"npm_packages": \([0-9]*\).*/\1/p' "$EXTRA$doc") npm packages) and the javascript kernelspec"
