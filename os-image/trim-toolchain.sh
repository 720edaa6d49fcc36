#!/bin/sh
# What build-essential and python3-dev bring that no build in a sandbox uses,
# for the flavors that ship a compiler (e2b-base, e2b-ci): run by their
# mkosi.postinst. About 30 MiB of the compressed layer. Paths are resolved
# inside the root (sandbox/inroot.py); the shell only lists names.
set -eu
in_root() { PYTHONPATH="$SRCDIR" /usr/bin/python3 -m sandbox.inroot "$BUILDROOT" "$@"; }
root_names() { # GLOB (relative to the root): the matching paths, relative
	for p in "$BUILDROOT"/$1; do [ -e "$p" ] || [ -L "$p" ] && printf '%s\n' "${p#"$BUILDROOT"/}"; done
}
# gcc's sanitizer runtimes (-fsanitize=address, thread, …; about 14.5 MiB):
# a C extension built by pip never links them; such a link now fails with
# "cannot find -lasan".
in_root rm 'usr/lib/x86_64-linux-gnu/libasan.so*' 'usr/lib/x86_64-linux-gnu/libhwasan.so*' \
	'usr/lib/x86_64-linux-gnu/liblsan.so*' 'usr/lib/x86_64-linux-gnu/libtsan.so*' \
	'usr/lib/x86_64-linux-gnu/libubsan.so*'
for d in $(root_names 'usr/lib/gcc/x86_64-linux-gnu/*'); do
	in_root rm "$d/libasan*" "$d/libhwasan*" "$d/liblsan*" "$d/libtsan*" "$d/libubsan*" "$d/libsanitizer.spec"
done
# libpython's static archives (about 7 MiB): extensions link no libpython
# on Linux, and embedding links the shared one.
for d in $(root_names 'usr/lib/python3*/config-*-x86_64-linux-gnu'); do
	in_root rm "$d/libpython3*.a"
done
in_root rm 'usr/lib/x86_64-linux-gnu/libpython3*.a'
# gcc's LTO dumper (lto-dump, 32 MiB installed): a debugging aid for GCC's
# own developers; -flto builds do not run it.
in_root rm 'usr/bin/x86_64-linux-gnu-lto-dump*' 'usr/bin/lto-dump*'
# OpenSSL's static archives (libssl-dev, which node-gyp brings; about 4 MiB):
# node-gyp and pip builds link the shared libraries.
in_root rm usr/lib/x86_64-linux-gnu/libcrypto.a usr/lib/x86_64-linux-gnu/libssl.a
