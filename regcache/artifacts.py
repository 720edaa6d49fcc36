"""Pinned artifacts and envd's source build through the shared cache
(regcache/README.md).

pinfetch: wraps one `pinfetch --lock L --name N --output ... --cache DIR`
run. Before it, an artifact missing from pinfetch's cache is pulled from the
registry into it (tag pin-sha256-HEX or pin-tree-HEX, by the pin pinfetch's
cache keys it by). pinfetch then hashes every cache hit again as it copies
it out, so a pulled artifact is checked twice: here against its pin (a
sha256 pin) or its entry, and by pinfetch against both pins. After it, an
artifact the registry lacks is pushed.

envd: CACHE/envd-source/KEY (os-image/envd-source.sh's binary and record)
as the entry envd-KEY. envd-source.sh checks the record against the binary
as it does for its own cache.
"""
import base64
import json
import os
import subprocess

from regcache import entry
from regcache.registry import Refused
from regcache.shared import Shared

PIN_CAP = 4 << 30
ENVD_CAP = 1 << 30


def pinfetch_args(argv: list) -> dict:
    """The options of a pinfetch command line that name the artifact and its cache."""
    out = {"cache": "out/cache/pinfetch"}
    it = iter(argv[1:])
    for a in it:
        if a in ("--lock", "--name", "--cache"):
            out[a[2:]] = next(it, None)
        elif a.startswith(("--lock=", "--name=", "--cache=")):
            k, _, v = a[2:].partition("=")
            out[k] = v
        elif a in ("--no-cache", "--offline"):
            out[a[2:]] = True
    return out


def pin_of(pinfetch: str, lock: str, name: str) -> dict:
    cp = subprocess.run([pinfetch, "--lock", lock, "--name", name, "--json"], capture_output=True, text=True)
    return json.loads(cp.stdout) if cp.returncode == 0 else {}


def cache_entry(cache: str, pin: dict) -> tuple | None:
    """(kind, hex, path) of pinfetch's cache entry for PIN: a tree pin's when it has one."""
    if pin.get("tree_sha256", "").startswith("sha256-"):
        try:
            hx = base64.b64decode(pin["tree_sha256"][len("sha256-"):], validate=True).hex()
        except ValueError:
            return None
        return "tree", hx, os.path.join(cache, "tree", hx)
    if pin.get("sha256"):
        return "sha256", pin["sha256"], os.path.join(cache, "sha256", pin["sha256"])
    return None


def pull_pin(shared: Shared, kind: str, hx: str, path: str, pin: dict) -> bool:
    def place(tmp: str) -> None:
        got, _ = entry.file_digest(os.path.join(tmp, "artifact"))
        if pin.get("sha256") and got != "sha256:" + pin["sha256"]:
            raise Refused(f"its bytes are not those [{pin.get('name')}] pins (sha256 {got})")
        os.chmod(os.path.join(tmp, "artifact"), 0o644)
        os.rename(os.path.join(tmp, "artifact"), path)
    return shared.pull(f"pin-{kind}-{hx}", "pin", f"{kind}:{hx}", ["artifact"], os.path.dirname(path), PIN_CAP,
                       place, lambda e: f"cache registry {shared.ref}: artifact {pin.get('name')} refused: {e}; "
                                        "fetching it instead")


def pinfetch(argv: list) -> int:
    """Runs ARGV (a pinfetch command line) with the registry before and after it."""
    shared = Shared()
    o = pinfetch_args(argv)
    pin = pin_of(argv[0], o.get("lock") or "", o.get("name") or "") if o.get("lock") and o.get("name") else {}
    where = None if o.get("no-cache") or not pin else cache_entry(o["cache"], pin)
    local = bool(where) and os.path.isfile(where[2])
    pulled = False
    if where and not local and not o.get("offline"):
        pulled = pull_pin(shared, *where, pin)
    rc = subprocess.run(argv).returncode
    if rc == 0 and where:
        shared.got("artifact", "local" if local else "registry" if pulled else "fetched")
        if os.path.isfile(where[2]) and not o.get("offline"):
            kind, hx, path = where
            shared.push(f"pin-{kind}-{hx}", "pin", f"{kind}:{hx}", [("artifact", path)])
    return rc


def envd_pull(key: str, dest: str) -> int:
    """0 when envd-KEY came from the registry into DEST (renamed into place whole), else 1."""
    shared = Shared()

    def place(tmp: str) -> None:
        os.chmod(os.path.join(tmp, "envd"), 0o755)
        os.chmod(tmp, 0o755)
        os.rename(tmp, dest)
    ok = shared.pull(f"envd-{key}", "envd", key, ["envd", "build.json"], os.path.dirname(dest), ENVD_CAP, place,
                     lambda e: f"cache registry {shared.ref}: envd {key} refused: {e}; building it instead")
    return 0 if ok else 1


def envd_push(key: str, src: str) -> int:
    Shared().push(f"envd-{key}", "envd", key,
                  [("envd", os.path.join(src, "envd")), ("build.json", os.path.join(src, "build.json"))])
    return 0
