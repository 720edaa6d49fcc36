#!/usr/bin/env bash
# e2b-base's preparation step, run by os-image/build.sh before mkosi: yarn.
# E2B's base has yarn 1 (the Node.js image's); Debian's yarnpkg is the same
# yarn but depends on TypeScript and esbuild (os-image/README.md, "e2b-base").
# So yarn is npm's own package, pinned by its sha512 integrity in
# recipes/yarn/package-lock.json (no registry URL in it: npm fetches from the
# machine's configured registry and checks the integrity), and laid out as
# `npm install -g yarn` lays it out under npm's global prefix:
#   /usr/local/lib/node_modules/yarn, /usr/local/bin/{yarn,yarnpkg} -> its bin/yarn.js
# Its record goes into the manifest's artifacts. Everything is staged in WORK
# and moved into EXTRA at the end, so a failure leaves EXTRA as it was.
#
# Environment, from os-image/build.sh: EXTRA WORK RECIPES CACHE OFFLINE PYTHON.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
die() { printf 'e2b-base: yarn: %s\n' "$*" >&2; exit 1; }
for v in EXTRA WORK RECIPES CACHE; do
    [ -n "${!v:-}" ] || die "$v is not set (see the header of $0)"
done
py=${PYTHON:-/usr/bin/python3}
recipe=$RECIPES/yarn
for f in package.json package-lock.json; do
    [ -f "$recipe/$f" ] || die "$recipe/$f: not found (recipes=$RECIPES; recipes/README.md says how to make it)"
done
npm_version=$(npm --version 2>/dev/null) || die "npm not found on the build host: install npm (make deps)"
[ "${npm_version%%.*}" -ge 9 ] 2>/dev/null ||
    die "npm $npm_version on the build host is too old (lockfile v3 needs npm >= 9): install npm (make deps)"

# The one package the lock pins, and its integrity: the lock must hold just it.
read -r version integrity < <("$py" - "$recipe/package-lock.json" <<'PY'
import json, sys
packages = json.load(open(sys.argv[1]))["packages"]
entries = {k: v for k, v in packages.items() if k}
if list(entries) != ["node_modules/yarn"]:
    sys.exit(f"{sys.argv[1]}: pins {sorted(entries)}, not just node_modules/yarn")
y = entries["node_modules/yarn"]
if "resolved" in y or not y.get("integrity", "").startswith("sha512-"):
    sys.exit(f"{sys.argv[1]}: node_modules/yarn needs a sha512 integrity and no resolved URL")
print(y["version"], y["integrity"])
PY
) || die "$recipe/package-lock.json is not a yarn lock this build takes (above)"

stage=$WORK/yarn-stage
rm -rf "$stage"
mkdir -p "$stage/app" "$stage/out" "$CACHE/npm"
cp "$recipe/package.json" "$recipe/package-lock.json" "$stage/app/"
npmargs=(--ignore-scripts --no-audit --no-fund --no-update-notifier --cache "$CACHE/npm")
[ "${OFFLINE:-0}" = 1 ] && npmargs+=(--offline)
if ! (cd "$stage/app" && npm ci "${npmargs[@]}") > "$stage/npm.log" 2>&1; then
    PYTHONPATH="$here/../.." "$py" -m sandbox.termsafe < "$stage/npm.log" | grep -v '^npm warn' >&2 || true
    if [ "${OFFLINE:-0}" = 1 ]; then hint="offline=1 takes it from $CACHE/npm: build once online to fill it"
    else hint="check the machine's npm registry (npm config get registry) and that yarn@$version's integrity is $integrity"; fi
    die "npm ci of $recipe/package-lock.json failed (its output above); $hint"
fi
got=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$stage/app/node_modules/yarn/package.json")
[ "$got" = "$version" ] || die "npm installed yarn $got, the lock pins $version"

dest=/usr/local/lib/node_modules/yarn
mkdir -p "$stage/out$dest" "$stage/out/usr/local/bin"
cp -a "$stage/app/node_modules/yarn/." "$stage/out$dest/"
[ -f "$stage/out$dest/bin/yarn.js" ] || die "yarn $version has no bin/yarn.js (its layout changed?)"
for b in yarn yarnpkg; do ln -s ../lib/node_modules/yarn/bin/yarn.js "$stage/out/usr/local/bin/$b"; done
chmod -R u=rwX,go=rX "$stage/out"
chmod 0755 "$stage/out$dest/bin/yarn.js"

rm -rf "${EXTRA:?}$dest" "$EXTRA/usr/local/bin/yarn" "$EXTRA/usr/local/bin/yarnpkg"
mkdir -p "$EXTRA$(dirname "$dest")" "$EXTRA/usr/local/bin"
mv "$stage/out$dest" "$EXTRA$dest"
mv "$stage/out/usr/local/bin/yarn" "$stage/out/usr/local/bin/yarnpkg" "$EXTRA/usr/local/bin/"
"$py" -c 'import json,sys; print(json.dumps({"name": "yarn", "version": sys.argv[1], "integrity": sys.argv[2],
    "lock": "yarn/package-lock.json", "path": sys.argv[3]}, sort_keys=True))' \
    "$version" "$integrity" "$dest" >> "$WORK/artifacts.jsonl"
rm -rf "$stage"
printf 'e2b-base: staged yarn %s (%s) at %s\n' "$version" "$integrity" "$dest" >&2
