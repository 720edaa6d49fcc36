"""One build's use of the shared cache (regcache/README.md): the registry
from the environment make sets, whether it is still in this build's use,
pulls and pushes through it, and the ledger of where each step, artifact
and envd came from.

    CACHE_REGISTRY        REGISTRY/REPO (make cache_registry=), empty: none
    CACHE_REGISTRY_PUSH   1 (push what this build made or the registry lacks) or 0
    CERT_DIR              CAs for the registry, instead of certs.d (make cert_dir=)
    CACHE_LEDGER          the build's ledger file (template.sh or build.sh makes it)
    OFFLINE               1: the registry is not used, as no other network is

The ledger is a text file the build's steps append to, one word per field:
`got KIND ORIGIN` (ORIGIN local, registry, or made: run, fetched, built),
`pushed KIND`, and `down` once the registry failed: the first process that
finds it unreachable or refusing prints the one line saying so, and every
later one leaves it alone.
"""
import os
import shutil
import sys

from regcache import entry
from regcache.registry import Miss, Refused, Registry, Unavailable
from sandbox.termsafe import escape

MADE = {"step": "run", "artifact": "fetched", "envd": "built"}
PLURAL = {"step": "steps", "artifact": "artifacts", "envd": "envd"}


class Shared:
    def __init__(self):
        self.ref = os.environ.get("CACHE_REGISTRY") or None
        self.push_on = os.environ.get("CACHE_REGISTRY_PUSH", "1") != "0"
        self.ledger = os.environ.get("CACHE_LEDGER") or None
        if os.environ.get("OFFLINE") == "1":
            self.ref = None
        self._reg = None

    def lines(self) -> list:
        if not self.ledger:
            return []
        try:
            with open(self.ledger, encoding="utf-8") as f:
                return f.read().split("\n")
        except FileNotFoundError:
            return []

    def note(self, line: str) -> None:
        if self.ledger:
            with open(self.ledger, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    def registry(self) -> Registry | None:
        """The registry, while it is in this build's use; None otherwise."""
        if not self.ref or "down" in self.lines():
            return None
        if self._reg is None:
            try:
                self._reg = Registry(self.ref, os.environ.get("CERT_DIR") or None)
            except Unavailable as e:
                self.down(e)
                return None
        return self._reg

    def down(self, err: Exception) -> None:
        if "down" not in self.lines():
            print(escape(f"cache registry {self.ref}: {err}; this build goes on with its local cache "
                         "and makes what is missing"), file=sys.stderr)
        self.note("down")
        self._reg = None
        self.ref = None

    def pull(self, tag: str, kind: str, key: str, names: list, parent: str, cap: int, place, refused) -> bool:
        """The entry under TAG (regcache/entry.py: verified, in a fresh
        directory in PARENT) handed to PLACE(dir), which may refuse it too
        and moves what it keeps. False on a miss, a refusal (REFUSED(reason)
        is the line to print), an unavailable registry, or an entry that
        cannot be put in place."""
        reg = self.registry()
        if reg is None:
            return False
        tmp = None
        try:
            os.makedirs(parent, exist_ok=True)
            tmp = entry.pull(reg, tag, kind, key, names, parent, cap)
            place(tmp)
            return True
        except Miss:
            return False
        except Refused as e:
            print(escape(refused(e)), file=sys.stderr)
            return False
        except Unavailable as e:
            self.down(e)
            return False
        except OSError as e:
            print(escape(refused(f"it cannot be put in place ({e})")), file=sys.stderr)
            return False
        finally:
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)

    def push(self, tag: str, kind: str, key: str, files: list, tenant: str | None = None,
             replace: bool = False) -> None:
        """FILES ([(name, path)]) under TAG, unless pushing is off or
        (without REPLACE) the registry has the tag already."""
        reg = self.registry()
        if reg is None or not self.push_on:
            return
        try:
            if not replace and reg.has_manifest(tag):
                return
            entry.push(reg, tag, kind, key, files, tenant)
            self.pushed(kind)
        except (Unavailable, Miss) as e:
            self.down(e)

    def got(self, kind: str, origin: str) -> None:
        self.note(f"got {kind} {origin}")

    def pushed(self, kind: str) -> None:
        self.note(f"pushed {kind}")


def summary(path: str, ref: str | None) -> str:
    """The build's line: per kind, how many came from where."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.split() for ln in f]
    except FileNotFoundError:
        lines = []
    parts = []
    for kind in ("step", "artifact", "envd"):
        got = [ln[2] for ln in lines if len(ln) == 3 and ln[:2] == ["got", kind]]
        if not got:
            continue
        parts.append(f"{PLURAL[kind]} {got.count('local')} local, {got.count('registry')} from the registry, "
                     f"{got.count(MADE[kind])} {MADE[kind]}")
    pushed = sum(1 for ln in lines if ln[:1] == ["pushed"])
    if ref:
        state = "unused from there on (see above)" if ["down"] in lines else f"{pushed} entries pushed"
        parts.append(f"registry {ref}: {state}")
    return "cache: " + ("; ".join(parts) if parts else "nothing pinned or cached in this build")
