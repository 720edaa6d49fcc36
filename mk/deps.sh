#!/usr/bin/env bash
# make deps: install everything the build and the tests need, on Debian 12
# (bookworm) and 13 (trixie), as root. Idempotent; close to instant when
# everything is already present.
#
# No archive host name appears here: on bookworm the backports suite (for
# mkosi >= 24) is added by reusing the URI of the machine's own Debian source.
set -euo pipefail

say() { printf 'deps: %s\n' "$*" >&2; }
die() { printf 'deps: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (apt-get install); rerun with sudo"
. /etc/os-release
codename=${VERSION_CODENAME:-}
case "$codename" in
  bookworm|trixie) ;;
  *) die "unsupported release '${PRETTY_NAME:-unknown}': Debian 12 (bookworm) or 13 (trixie) is required" ;;
esac

# Build: C toolchain, -dev libraries found through pkg-config, fuzzers.
pkgs_build="build-essential pkg-config clang libclang-rt-dev
  libcurl4-openssl-dev libssl-dev libnftnl-dev libmnl-dev libsystemd-dev
  libjansson-dev libarchive-dev"
# Tests and benchmarks: real clients and servers. libzmq3-dev and
# python3-jupyter-client: tests/image_ci/test_ci_ijavascript.py builds the
# javascript kernel's zmq.node and runs the kernel on the host;
# default-jre-headless: keytool and java for tests/image_ci/test_ci_java_cacerts.py.
pkgs_test="python3 python3-pytest python3-pytest-xdist python3-packaging python3-botocore
  curl nftables iproute2 golang-go wrk nginx-light hyperfine
  openssl procps psmisc strace python3-yaml python3-jsonschema python3-bcrypt
  docker-registry python3-pip python3-venv nix-bin xz-utils zip socat
  libzmq3-dev python3-jupyter-client default-jre-headless"
# Images: mkosi's host tools, OCI tools, the boot test; pip for e2b-ci's
# wheels (pydeps=pip) and packaging for its constraints generator; binutils
# strips the debug info some wheels ship (e2b-ci mkosi.postinst) and its
# readelf reads a template's guard closure (sandbox/guard_record.py); the
# builder-mode tests' own base image (debootstrap).
pkgs_image="kmod e2fsprogs bubblewrap debian-archive-keyring zstd
  skopeo umoci qemu-system-x86 qemu-utils cpio git rsync fakeroot
  busybox-static python3-pip python3-packaging binutils debootstrap
  slirp4netns"

# libclang-rt-dev is called libclang-rt-14-dev on bookworm.
[ "$codename" = bookworm ] && pkgs_build=${pkgs_build/libclang-rt-dev/libclang-rt-14-dev}

# node and npm (for the JS SDK's version parser): Debian's, unless the machine
# already has a Node.js that brings its own npm (NodeSource's conflicts with
# Debian's npm package).
pkgs_node=""
command -v node >/dev/null 2>&1 || pkgs_node="nodejs"
command -v npm >/dev/null 2>&1 || pkgs_node="$pkgs_node npm"

# shellcheck disable=SC2086
want=$(printf '%s\n' $pkgs_build $pkgs_test $pkgs_image $pkgs_node)

# One dpkg-query for the whole list keeps the all-present case fast.
missing() {
  local installed
  # shellcheck disable=SC2086
  installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' $want 2>/dev/null |
    awk '$2 == "installed" { print $1 }')
  comm -23 <(printf '%s\n' $want | sort -u) <(printf '%s\n' $installed | sort -u)
}

mkosi_ok() {
  command -v mkosi >/dev/null 2>&1 || return 1
  local v
  v=$(mkosi --version 2>/dev/null | awk '{print $2}')
  [ "${v%%.*}" -ge 24 ] 2>/dev/null
}

# npm packages the tests use (tests/pin/test_envd_version.py reads versions
# with the JS SDK's parser), in one fixed prefix the tests know. Present at
# the pinned major: nothing to do.
NPM_TEST_PREFIX=/usr/local/lib/e2b-images-tests
npm_test_pkgs="compare-versions@6"
npm_deps() {
  local spec name major missing_npm=""
  for spec in $npm_test_pkgs; do
    name=${spec%@*} major=${spec##*@}
    grep -qs "\"version\": *\"$major\." "$NPM_TEST_PREFIX/node_modules/$name/package.json" ||
      missing_npm="$missing_npm $spec"
  done
  [ -n "$missing_npm" ] || return 0
  say "installing npm packages for the tests into $NPM_TEST_PREFIX:$missing_npm"
  mkdir -p "$NPM_TEST_PREFIX"
  # shellcheck disable=SC2086
  npm install --prefix "$NPM_TEST_PREFIX" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error $missing_npm >&2 ||
    die "npm install$missing_npm failed: the npm registry must be reachable (or set npm's registry to a mirror)"
}

# envd is built from source with a pinned toolchain (GOTOOLCHAIN, which Go
# 1.21 and newer fetch through the module proxy): a Go that can switch is
# needed, found as os-image/envd-source.sh finds it (mk/find-go.sh).
go_ok() { bash "$(dirname "$0")/find-go.sh" >/dev/null 2>&1; }

# The build sandbox's ids (sandbox/ids.py): root inside a confined build is
# one of these, never the host's root. A system user of its own holds a
# range of 64 slots of 65536 subordinate ids, by default from 2^31 (above
# what useradd hands out, below 2^32), else after every range already given.
SUBID_USER=e2b-build SUBID_COUNT=$((64 * 65536))
sandbox_ids() {
  getent passwd "$SUBID_USER" >/dev/null ||
    useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$SUBID_USER" ||
    die "cannot add the system user $SUBID_USER (the build sandbox's subordinate ids)"
  local f have=1
  for f in /etc/subuid /etc/subgid; do
    awk -F: -v u="$SUBID_USER" -v n=65536 '$1 == u && $3 >= n { ok = 1 } END { exit !ok }' "$f" 2>/dev/null || have=0
  done
  [ "$have" = 0 ] || return 0
  local start=2147483648 end
  end=$(cat /etc/subuid /etc/subgid 2>/dev/null | awk -F: '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ { e = $2 + $3; if (e > m) m = e } END { print m + 0 }')
  [ "$end" -le "$start" ] || start=$end
  [ $((start + SUBID_COUNT)) -le 4294967294 ] || die "no room for $SUBID_COUNT subordinate ids after $start in /etc/subuid, /etc/subgid: give $SUBID_USER a range by hand"
  say "giving $SUBID_USER the subordinate ids $start-$((start + SUBID_COUNT - 1)) (the build sandbox's)"
  usermod --add-subuids "$start-$((start + SUBID_COUNT - 1))" --add-subgids "$start-$((start + SUBID_COUNT - 1))" "$SUBID_USER" ||
    die "usermod --add-subuids for $SUBID_USER failed"
}

need=$(missing | tr '\n' ' ')
if [ -z "${need// }" ] && mkosi_ok && go_ok; then
  sandbox_ids
  npm_deps
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive

# The machine's own Debian archive URI: the first deb source whose suite is
# the release itself (deb822 .sources or one-line sources.list).
debian_uri() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v rel="$codename" '
      BEGIN { RS=""; FS="\n" }
      {
        uri=""; suites=""; types=""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^[ \t]*#/) continue
          if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i);   uri=$i }
          if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites=" " $i " " }
          if ($i ~ /^Types:/)  { types=$i }
        }
        if (types ~ /deb( |$)/ && index(suites, " " rel " ")) { split(uri, u, " "); print u[1]; exit }
      }' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    awk -v rel="$codename" '$1 == "deb" {
        i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i+1) == rel) { print $i; exit } }' "$f"
  done
}

backports=/etc/apt/sources.list.d/e2b-images-backports.sources
if [ "$codename" = bookworm ] && [ ! -f "$backports" ]; then
  uri=$(debian_uri | head -n1)
  [ -n "$uri" ] || die "no Debian source for '$codename' in /etc/apt/sources.list*; add one, then rerun make deps"
  say "adding bookworm-backports from the machine's Debian source"
  cat > "$backports.tmp" <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  mv "$backports.tmp" "$backports"
fi

say "installing: ${need:-mkosi}"
apt-get update -qq
# shellcheck disable=SC2086
[ -z "${need// }" ] || apt-get install -y -qq --no-install-recommends $need
if ! mkosi_ok; then
  if [ "$codename" = bookworm ]; then
    apt-get install -y -qq --no-install-recommends -t bookworm-backports mkosi systemd-container
  else
    apt-get install -y -qq --no-install-recommends mkosi systemd-container
  fi
fi
mkosi_ok || die "mkosi >= 24 is still missing after install; check apt's sources for backports"
if ! go_ok; then
  # bookworm's golang-go is 1.19, too old to switch toolchains; trixie's is 1.24.
  if [ "$codename" = bookworm ]; then
    apt-get install -y -qq --no-install-recommends -t bookworm-backports golang-1.23-go
  else
    apt-get install -y -qq --no-install-recommends golang-go
  fi
fi
go_ok || die "no Go >= 1.21 after install (envd is built from source): install one on PATH"
sandbox_ids
npm_deps
say "done"
