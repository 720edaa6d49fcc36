#!/usr/bin/python3
"""Compare two builds of a flavor (OUT dirs). Exit 0 if bit-identical.

Prints the four output digests side by side; on any difference, the files
of the two output directories that differ, then every layer member that
differs (content sha256, mode, owner, mtime, type, link target, PAX headers)
or the member order, then diffoscope's report on rootfs.ext4 when diffoscope
is installed (the ext4 is built from the layer, so the layer names the files).
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile


def digests(out):
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    o = m["outputs"]
    return {
        "oci manifest": o["oci"]["manifest"]["digest"],
        "oci config": o["oci"]["config"]["digest"],
        "oci layer": o["oci"]["layers"][0]["digest"],
        "rootfs.ext4": "sha256:" + o["rootfs.ext4"]["sha256"],
    }


def file_sha(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def layer_members(out):
    d = digests(out)["oci layer"].split(":")[1]
    path = os.path.join(out, "oci", "blobs", "sha256", d)
    members = {}
    with tarfile.open(path, "r:gz") as t:
        for m in t:
            data = t.extractfile(m).read() if m.isfile() else b""
            members[m.name] = (m.mode, m.uid, m.gid, m.mtime, m.type, m.linkname,
                               hashlib.sha256(data).hexdigest(), tuple(sorted(m.pax_headers.items())))
    return members, list(members)


def main(a, b):
    da, db = digests(a), digests(b)
    same = True
    for k in da:
        mark = "same" if da[k] == db[k] else "DIFFERS"
        same &= da[k] == db[k]
        print(f"repro: {k:13} {mark:8} {da[k]}  {db[k]}")
    files = ["manifest.json", "rootfs.ext4", "oci/index.json", "oci/oci-layout"]
    for f in files:
        if file_sha(os.path.join(a, f)) != file_sha(os.path.join(b, f)):
            same = False
            print(f"repro: {f} differs")
    if same:
        print("repro: identical")
        return 0
    ma, oa = layer_members(a)
    mb, ob = layer_members(b)
    for name in sorted(set(ma) | set(mb)):
        if ma.get(name) != mb.get(name):
            print(f"repro: layer member differs: {name}: {ma.get(name)} != {mb.get(name)}")
    if oa != ob and set(oa) == set(ob):
        print("repro: layer member order differs")
    if shutil.which("diffoscope"):
        subprocess.run(["diffoscope", "--text", "-", os.path.join(a, "rootfs.ext4"),
                        os.path.join(b, "rootfs.ext4")])
    return 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: compare.py OUT1 OUT2", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
