#!/bin/bash
# e2b-ci's preparation step, run by os-image/build.sh after the pinned
# artifacts are fetched and before mkosi (so everything here fails fast):
#
#   1. take the pinned e2b-dev/code-interpreter tree: pinfetch has already
#      unpacked the archive safely and verified the tree against its
#      tree_sha256 (os-image/e2b-ci/pins puts it in the extra tree),
#   2. apply PATCHES (apply-patches.sh: fuzz 0, a failing patch is named),
#   3. lay out what the image ships into the extra tree, and drop the source,
#   4. pydeps=pip only: check constraints/ and download the pinned wheels,
#   5. the kernels beyond python (kernels=): javascript's tree from its pins
#      and lockfile (ijavascript-stage.sh), with zeromq's source handed to
#      mkosi.build; the bash and java kernels' wheels (for pydeps=debian too).
#
# Environment, from os-image/build.sh (the knobs pydeps=, pip_index= and
# kernels= of os-image/image.mk): EXTRA (the extra tree), WORK (scratch),
# RELEASE, PYDEPS=debian|pip, PIP_INDEX=URL, KERNELS (build.sh's checked,
# ordered list), and for the pins TOOLS RECIPES CACHE PIN_MIRROR OFFLINE.
# Standalone use (tests, make ci-patch-check): prepare.sh --source DIR
# --extra DIR --work DIR, with Debian's Python stack unless PYDEPS says otherwise
# (DIR is a verified tree, e.g. from `pinfetch --lock … --output DIR`; it is copied, not changed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
prefix=/usr/lib/e2b-code-interpreter
docdir=/usr/share/doc/e2b-code-interpreter
source_in_tree=$prefix/source

die() { echo "e2b-ci: $*" >&2; exit 1; }

source=
while [ $# -gt 0 ]; do
	case $1 in
	--source) source=$2; shift 2 ;;
	--extra) EXTRA=$2; shift 2 ;;
	--work) WORK=$2; shift 2 ;;
	*) echo "usage: prepare.sh [--source DIR] [--extra DIR] [--work DIR]" >&2; exit 2 ;;
	esac
done
: "${EXTRA:?EXTRA (the extra tree) is not set}" "${WORK:?WORK is not set}"

# 1. The verified tree, into WORK (moved when it is the build's own copy).
src=$WORK/code-interpreter
rm -rf "$src"
mkdir -p "$WORK"
if [ -n "$source" ]; then
	[ -d "$source" ] || die "code-interpreter: $source: not a directory"
	cp -a "$source" "$src"
else
	[ -d "$EXTRA$source_in_tree" ] || die "code-interpreter: $EXTRA$source_in_tree not found (is it listed in os-image/e2b-ci/pins?)"
	mv "$EXTRA$source_in_tree" "$src"
fi
for f in LICENSE template/server/main.py template/jupyter_server_config.py \
	template/ipython_kernel_config.py template/startup_scripts chart_data_extractor/e2b_charts; do
	[ -e "$src/$f" ] || die "code-interpreter: the source has no $f (upstream layout changed? check the pin)"
done

# 2. Our patches.
"$here/apply-patches.sh" "$src" "$here/PATCHES" "$here/patches"

# 3. Lay out. Plain modes; owners and times are normalised by mkosi/pack.py.
rm -rf "$EXTRA$prefix" "$EXTRA$docdir"
install -d -m 0755 "$EXTRA$prefix/server" "$EXTRA$prefix/startup" "$EXTRA$prefix/python" \
	"$EXTRA/etc/jupyter" "$EXTRA/etc/ipython" "$EXTRA$docdir"
(cd "$src/template/server" && find . -name '__pycache__' -prune -o -type f -print0 \
	| cpio --null -pdm --quiet "$EXTRA$prefix/server")
cp -R "$src/chart_data_extractor/e2b_charts" "$EXTRA$prefix/python/"
# Ours: the Jupyter server's kernel spec manager (patch 0005).
install -m 0644 "$here/python/e2b_kernelspecs.py" "$EXTRA$prefix/python/"
find "$EXTRA$prefix/python" -name '__pycache__' -prune -exec rm -rf {} +
install -m 0644 "$src"/template/startup_scripts/*.py "$EXTRA$prefix/startup/"
install -m 0644 "$src/template/jupyter_server_config.py" "$EXTRA/etc/jupyter/"
install -m 0644 "$src/template/ipython_kernel_config.py" "$EXTRA/etc/ipython/"
install -m 0644 "$src/LICENSE" "$EXTRA$docdir/LICENSE"
[ -f "$src/chart_data_extractor/LICENSE" ] && install -m 0644 "$src/chart_data_extractor/LICENSE" "$EXTRA$docdir/LICENSE.e2b_charts"
# Upstream's Python recipe, the reference for the stack table (stack-table.py).
[ -f "$src/template/requirements.txt" ] && install -m 0644 "$src/template/requirements.txt" "$EXTRA$docdir/requirements.txt"
[ -f "$src/template/server/requirements.txt" ] && install -m 0644 "$src/template/server/requirements.txt" "$EXTRA$docdir/server-requirements.txt"
install -m 0644 "$here/PATCHES" "$EXTRA$docdir/PATCHES"
install -m 0644 "$here"/patches/*.patch "$EXTRA$docdir/"
install -m 0644 "$here/README.image" "$EXTRA$docdir/README.e2b-images"
chmod -R u=rwX,go=rX "$EXTRA$prefix"

# 4. pydeps=pip: a venv from constraints/, prepared here (network, before
# mkosi) and installed offline by mkosi.postinst.
pydeps=${PYDEPS:-debian}
kernels=,${KERNELS:-python},
wheels=$EXTRA/var/lib/e2b-ci-pydeps
rm -rf "$wheels"
# The bash and java kernels' wheels (constraints/e2b-ci-kernels.txt, only the
# sections of the kernels asked for) go into the same venv for both pydeps.
kernel_wheels=()
[[ $kernels == *,bash,* || $kernels == *,java,* ]] && kernel_wheels=(e2b-ci-kernels.txt)
case $pydeps in
debian) [ ${#kernel_wheels[@]} -eq 0 ] ||
	KERNELS=${KERNELS:-python} PIP_INDEX=${PIP_INDEX:-} "$here/pip-download.sh" "$top/constraints" "$wheels" \
		"${RELEASE:?kernels=: RELEASE is not set (os-image/build.sh sets it)}" "${kernel_wheels[@]}" ;;
pip) KERNELS=${KERNELS:-python} PIP_INDEX=${PIP_INDEX:-} "$here/pip-download.sh" "$top/constraints" "$wheels" \
	"${RELEASE:?pydeps=pip: RELEASE is not set (os-image/build.sh sets it)}" ;;
*) die "pydeps=$pydeps: unknown (debian or pip)" ;;
esac
# The constraints as installed (with their recorded deviations), for
# stack-table.py and the user.
if [ -d "$wheels/constraints" ]; then
	install -d -m 0755 "$EXTRA$docdir/constraints"
	install -m 0644 "$wheels"/constraints/*.txt "$EXTRA$docdir/constraints/"
fi

# 5. The other kernels. Standalone use (no KERNELS): python only.
if [[ $kernels == *,javascript,* ]]; then
	: "${TOOLS:?TOOLS is not set}" "${RECIPES:?RECIPES is not set}" "${CACHE:?CACHE is not set}"
	WORK=$WORK/ijavascript "$here/ijavascript-stage.sh" || die "javascript: ijavascript could not be staged (see above)"
	# zeromq's addon is compiled in the image (mkosi.build) from this source.
	zmq=$WORK/build-sources/e2b-ci-zeromq/node_modules
	rm -rf "$zmq"
	mkdir -p "$zmq"
	for m in zeromq nan; do
		[ -d "$EXTRA$prefix/ijavascript/node_modules/$m" ] || die "javascript: node_modules/$m was not staged"
		cp -R "$EXTRA$prefix/ijavascript/node_modules/$m" "$zmq/"
	done
fi
echo "e2b-ci: staged code-interpreter into $EXTRA (pydeps=$pydeps, kernels=${kernels:1:-1})"
