#!/usr/bin/python3
"""A venv of /usr/bin/python3 with a hash-pinned requirements file installed
(`pip install --require-hashes --only-binary :all: --no-deps`: the file pins
the whole closure, wheels only, no resolver), made again only when the
file's sha256 differs from the one the venv was made from (its stamp,
VENV/requirements.sha256, written last). Used for $(build)/e2b-sdk, E2B's
Python SDK for the Dockerfile formats (template/template.mk,
template/template.sh), and by tests/sdk for build/py-sdk.

  python3 -m template.e2b.sdk_venv --requirements FILE --venv DIR      prints DIR/bin/python

pip reaches its index through the machine's pip configuration
(PIP_INDEX_URL, /etc/pip.conf); no index is named here. Two builds at once
take turns (a lock beside the venv)."""
import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys

from sandbox.termsafe import escape


class VenvError(Exception):
    pass


def sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _current(venv: str, digest: str) -> bool:
    stamp = os.path.join(venv, "requirements.sha256")
    try:
        with open(stamp, encoding="ascii") as f:
            return f.read() == digest and os.path.exists(os.path.join(venv, "bin", "python"))
    except OSError:
        return False


def ensure(venv: str, requirements: str, timeout: int = 900) -> str:
    """VENV/bin/python, with REQUIREMENTS installed. Raises VenvError with a
    message naming the file or the venv and what to do."""
    venv = os.path.abspath(venv)
    try:
        digest = sha256(requirements)
    except OSError as e:
        raise VenvError(f"{requirements}: {e.strerror}") from None
    python = os.path.join(venv, "bin", "python")
    if _current(venv, digest):
        return python
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _current(venv, digest):  # made by the build we waited for
            return python
        shutil.rmtree(venv, ignore_errors=True)
        cp = subprocess.run(["/usr/bin/python3", "-m", "venv", venv], capture_output=True, text=True)
        if cp.returncode != 0:
            raise VenvError(f"{venv}: python3 -m venv failed (install python3-venv: make deps): "
                            f"{cp.stderr.strip()[-1500:]}")
        try:
            cp = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                 "--require-hashes", "--only-binary", ":all:", "--no-deps", "-r", requirements],
                                capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            shutil.rmtree(venv, ignore_errors=True)
            raise VenvError(f"pip install -r {requirements} into {venv}: no answer in {timeout}s; check the "
                            f"machine's pip index (PIP_INDEX_URL, /etc/pip.conf) and run it again") from None
        if cp.returncode != 0:
            shutil.rmtree(venv, ignore_errors=True)
            raise VenvError(f"pip install -r {requirements} into {venv} failed: {cp.stderr.strip()[-1500:]}\n"
                            f"The file pins every package by version and sha256: the machine's pip index "
                            f"(PIP_INDEX_URL, /etc/pip.conf) must serve those wheels; if the file was edited, "
                            f"regenerate it as its header says")
        with open(os.path.join(venv, "requirements.sha256"), "w", encoding="ascii") as f:
            f.write(digest)
    return python


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.sdk_venv")
    ap.add_argument("--requirements", required=True)
    ap.add_argument("--venv", required=True)
    a = ap.parse_args(argv)
    try:
        print(ensure(a.venv, a.requirements))
    except VenvError as e:
        for line in str(e).splitlines():
            print(escape(f"e2b-sdk: {line}"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
