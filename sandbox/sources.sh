#!/usr/bin/env bash
# sources.sh TOP DEST [NAME...]: the build's own copy of what mkosi and its
# scripts read from the checkout TOP (mkosi's configuration in os-image/, the
# guest tools' sources and rules for mkosi.build, our units, the sandbox's
# and the template build's scripts), into DEST, with an empty directory DEST/NAME
# for each further build source mkosi mounts there (its mount point: DEST is
# mounted read-only in the sandbox). Nothing else of the checkout: not out/
# (other builds' outputs, the caches), not build/, not a template's folder,
# not tests/ or examples/ or .git.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: sources.sh TOP DEST [NAME...]" >&2; exit 2; }
top=$1 dest=$2
shift 2
# What the build reads: the Makefile with every fragment it includes (for
# mkosi.build's `make guest-tools`) and the folders behind them.
SOURCES=(Makefile mk common guard mmds relay clone pin hostlink template os-image sandbox units ci/ci.mk)
for s in "${SOURCES[@]}"; do
    [ -e "$top/$s" ] || { echo "sources: $top/$s is missing: the checkout is incomplete" >&2; exit 1; }
done
(cd "$top" && rsync -a --relative --exclude __pycache__ --exclude '*.pyc' "${SOURCES[@]}" "$dest/")
for name in "$@"; do
    case "$name" in
        ''|*/*|.|..) echo "sources: build source name '$name': one plain name" >&2; exit 1 ;;
    esac
    mkdir -p "$dest/$name"
done
