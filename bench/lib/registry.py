#!/usr/bin/python3
"""Bench helper: a registry on loopback serving a Debian base, for as long
as this process lives (bench/e2b-from-image.sh).

    registry.py DIR [--empty]

Starts tests/registry.py's registry (docker-registry, TLS from a CA made
here, htpasswd auth) in DIR, pushes tests/builder/bases.py's Debian trixie
layout to it as library/python:3.13 (not with --empty: bench/cache-registry.sh's
shared cache), prints one line of shell assignments (addr, certs, auth,
image, layout), then waits for SIGTERM."""
import pathlib
import shlex
import signal
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "builder")]
import bases  # noqa: E402
from registry import tls_registry  # noqa: E402

d = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
with tls_registry(d, "bench", "bench-only-password") as r:
    layout = image = ""
    if sys.argv[2:] != ["--empty"]:
        layout = bases.debian_base(d / "layout")
        image = f"{r['addr']}/library/python:3.13"
        subprocess.run(["skopeo", "copy", "--quiet", "--dest-cert-dir", r["certs"], "--dest-authfile", r["auth"],
                        f"oci:{layout}:{bases.REF}", f"docker://{image}"], check=True)
    print(" ".join(f"{k}={shlex.quote(str(v))}" for k, v in
                   (("addr", r["addr"]), ("certs", r["certs"]), ("auth", r["auth"]), ("image", image),
                    ("layout", f"oci:{layout}:{bases.REF}" if layout else ""))), flush=True)
    signal.pause()
