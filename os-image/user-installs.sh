#!/bin/sh
# Package installs as E2B users make them, for the flavors with Python and
# Node.js (e2b-base, e2b-ci): run by their mkosi.postinst, after the base's
# (which made the user). os-image/README.md, "Installs", says what each line
# is for; in short:
#
#  - PEP 668: Debian marks its Python "externally managed", so `pip install`
#    refuses without --break-system-packages, a flag E2B's images never need.
#    The marker goes, and dpkg keeps it out of later installs (a reinstall of
#    libpython3.*-stdlib in a sandbox would bring it back).
#  - The user's own installs, without sudo: pip falls back to the user's site
#    (~/.local/lib/pythonX.Y/site-packages; it exists from the start, so a
#    Python that is already running, a Jupyter kernel, sees what lands there),
#    and `npm install -g` goes to ~/.local (~/.npmrc's prefix), whose bin/ is
#    on the login PATH (Debian's ~/.profile adds it when it exists).
#  - With sudo, pip and npm install into /usr/local, which stays root's: the
#    user sees those installs, and nothing that starts as root runs from a
#    place the user can write without sudo.
set -eu
# The root may hold a base image's tree (builder mode: hostile input): files
# are written through sandbox/inroot.py, which resolves each path inside the
# root, or from inside it (mkosi-chroot); its values reach the terminal
# escaped (sandbox/termsafe.py).
in_root() { PYTHONPATH="$SRCDIR" /usr/bin/python3 -m sandbox.inroot "$BUILDROOT" "$@"; }
refuse() {
    echo "user-installs: $1" | PYTHONPATH="$SRCDIR" /usr/bin/python3 -m sandbox.termsafe >&2
    exit 1
}
user=user
home=$(mkosi-chroot getent passwd "$user" | cut -d: -f6)
[ -n "$home" ] || refuse "no account '$user' in the image"
group=$(mkosi-chroot id -gn "$user")

# pip's own test of the marker's place: sysconfig's stdlib directory.
marker=$(mkosi-chroot python3 -c 'import os, sysconfig; print(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))')
mkosi-chroot rm -f "$marker"
printf '%s\n' "# PEP 668's marker stays out of later installs too (os-image/user-installs.sh):" \
    "# pip installs as on E2B, without --break-system-packages." \
    "path-exclude $marker" | in_root write etc/dpkg/dpkg.cfg.d/03-e2b-pip

site=$(mkosi-chroot env -i HOME="$home" python3 -c 'import site; print(site.getusersitepackages())')
case "$site" in
    "$home"/.local/*) ;;
    *) refuse "the user's site-packages is $site, not under $home/.local" ;;
esac
for d in "$home/.local" "$home/.local/bin" "$home/.local/lib" "${site%/*}" "$site"; do
    mkosi-chroot install -d -o "$user" -g "$group" -m 0755 "$d"
done
if mkosi-chroot test -x /usr/bin/npm; then
    printf '%s\n' "# npm install -g without sudo: into ~/.local (bin/ is on the login PATH)." \
        "# With sudo, npm's own prefix, /usr/local. (os-image/user-installs.sh)" \
        "prefix=$home/.local" | in_root write "${home#/}/.npmrc"
    mkosi-chroot chown "$user:$group" "$home/.npmrc"
fi
