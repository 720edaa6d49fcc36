#!/bin/bash
# e2b-ci's preparation step, run by os-image/build.sh after the pinned
# artifacts are fetched and before mkosi (so everything here fails fast):
#
#   1. unpack the pinned e2b-dev/code-interpreter archive (fetched by pinfetch
#      through os-image/e2b-ci/pins into the extra tree),
#   2. apply PATCHES (apply-patches.sh: fuzz 0, a failing patch is named),
#   3. lay out what the image ships into the extra tree, and drop the archive,
#   4. pydeps=pip only: check constraints/ and download the pinned wheels.
#
# Environment, from os-image/build.sh (the knobs pydeps= and pip_index= of
# os-image/image.mk): EXTRA (the extra tree), WORK (scratch), RELEASE,
# PYDEPS=debian|pip, PIP_INDEX=URL.
# Standalone use (tests, make ci-patch-check): prepare.sh --archive FILE
# --extra DIR --work DIR, with Debian's Python stack unless PYDEPS says otherwise.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
prefix=/usr/lib/e2b-code-interpreter
docdir=/usr/share/doc/e2b-code-interpreter
archive_in_tree=$prefix/source.tar.gz

die() { echo "e2b-ci: $*" >&2; exit 1; }

archive=
while [ $# -gt 0 ]; do
	case $1 in
	--archive) archive=$2; shift 2 ;;
	--extra) EXTRA=$2; shift 2 ;;
	--work) WORK=$2; shift 2 ;;
	*) echo "usage: prepare.sh [--archive FILE] [--extra DIR] [--work DIR]" >&2; exit 2 ;;
	esac
done
: "${EXTRA:?EXTRA (the extra tree) is not set}" "${WORK:?WORK is not set}"
[ -n "$archive" ] || archive=$EXTRA$archive_in_tree
[ -f "$archive" ] || die "code-interpreter: $archive not found (is it listed in os-image/e2b-ci/pins?)"

# 1. Unpack: one top-level directory (GitHub's <repo>-<commit>/), stripped.
src=$WORK/code-interpreter
rm -rf "$src"
mkdir -p "$src"
tops=$(tar -tzf "$archive" | cut -d/ -f1 | sort -u) || die "code-interpreter: $archive is not a gzip'd tar"
[ "$(printf '%s\n' "$tops" | wc -l)" = 1 ] || die "code-interpreter: $archive: expected one top-level directory, got: $(echo $tops)"
tar -xzf "$archive" -C "$src" --strip-components=1 --no-same-owner --no-same-permissions \
	|| die "code-interpreter: unpacking $archive failed"
for f in LICENSE template/server/main.py template/jupyter_server_config.py \
	template/ipython_kernel_config.py template/startup_scripts chart_data_extractor/e2b_charts; do
	[ -e "$src/$f" ] || die "code-interpreter: the archive has no $f (upstream layout changed? check the pin)"
done

# 2. Our patches.
"$here/apply-patches.sh" "$src" "$here/PATCHES" "$here/patches"

# 3. Lay out. Plain modes; owners and times are normalised by mkosi/pack.py.
rm -f "$EXTRA$archive_in_tree"
rm -rf "$EXTRA$prefix" "$EXTRA$docdir"
install -d -m 0755 "$EXTRA$prefix/server" "$EXTRA$prefix/startup" "$EXTRA$prefix/python" \
	"$EXTRA/etc/jupyter" "$EXTRA/etc/ipython" "$EXTRA$docdir"
(cd "$src/template/server" && find . -name '__pycache__' -prune -o -type f -print0 \
	| cpio --null -pdm --quiet "$EXTRA$prefix/server")
cp -R "$src/chart_data_extractor/e2b_charts" "$EXTRA$prefix/python/"
find "$EXTRA$prefix/python" -name '__pycache__' -prune -exec rm -rf {} +
install -m 0644 "$src"/template/startup_scripts/*.py "$EXTRA$prefix/startup/"
install -m 0644 "$src/template/jupyter_server_config.py" "$EXTRA/etc/jupyter/"
install -m 0644 "$src/template/ipython_kernel_config.py" "$EXTRA/etc/ipython/"
install -m 0644 "$src/LICENSE" "$EXTRA$docdir/LICENSE"
[ -f "$src/chart_data_extractor/LICENSE" ] && install -m 0644 "$src/chart_data_extractor/LICENSE" "$EXTRA$docdir/LICENSE.e2b_charts"
# Upstream's Python recipe, the reference for the stack table (stack-table.py).
[ -f "$src/template/requirements.txt" ] && install -m 0644 "$src/template/requirements.txt" "$EXTRA$docdir/requirements.txt"
install -m 0644 "$here/PATCHES" "$EXTRA$docdir/PATCHES"
install -m 0644 "$here"/patches/*.patch "$EXTRA$docdir/"
install -m 0644 "$here/README.image" "$EXTRA$docdir/README.e2b-images"
chmod -R u=rwX,go=rX "$EXTRA$prefix"

# 4. pydeps=pip: a venv from constraints/, prepared here (network, before
# mkosi) and installed offline by mkosi.postinst.
pydeps=${PYDEPS:-debian}
wheels=$EXTRA/var/tmp/e2b-ci-pydeps
rm -rf "$wheels"
case $pydeps in
debian) ;;
pip) PIP_INDEX=${PIP_INDEX:-} "$here/pip-download.sh" "$top/constraints" "$wheels" \
	"${RELEASE:?pydeps=pip: RELEASE is not set (os-image/build.sh sets it)}" ;;
*) die "pydeps=$pydeps: unknown (debian or pip)" ;;
esac
echo "e2b-ci: staged code-interpreter into $EXTRA (pydeps=$pydeps)"
