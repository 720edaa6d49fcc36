#!/usr/bin/python3
"""fromImage: an E2B template's registry base, pulled into the cache and
pinned by digest (template/template.sh, before anything is built).

    python3 -m template.e2b.pull --ref REF --template DIR --holder NAME --cache DIR [--cert-dir D]
                                 [--registry-auth TYPE] [--offline] [--trust-cache]
    python3 -m template.e2b.pull --write-lock PULLED --template DIR

REF is the Template JSON's fromImage as the SDK wrote it: `python:3.13`,
`registry:5000/team/app:1`, `name@sha256:...`; NAME is the template (of a
fromTemplate chain) whose fromImage it is; DIR is the folder make's
template= names, the only one a lock is read from or written to.

Pinning, as recipes/ pins our own sources: DIR/e2b.template.lock records the
digest the reference resolved to, the repository it resolved in and the
template it pins. A build with a lock pulls exactly that digest and never
asks the registry what the tag means now; a build without one resolves the
tag, pulls by the digest it got, and writes the lock (commit it; delete it
to move to the tag's newest image). A lock written for another fromImage or
another template is refused, so a changed fromImage is never built on the
old image; so is a lock whose repository is not the one fromImage names
(Docker's normalisation: `python` is docker.io/library/python), so a lock
cannot point a template at another repository. A reference with its own
@digest needs no lock.

Registry access is skopeo's own, from the places containers' tools read:
credentials from the auth file (REGISTRY_AUTH_FILE, else
$XDG_RUNTIME_DIR/containers/auth.json, else ~/.docker/config.json), mirrors
and `insecure` from registries.conf, CAs from certs.d (or cert_dir=, as
`make publish` takes it). The JSON's fromImageRegistry credentials are never
used: they would reach the build record and its logs.

The image is pulled by digest (containers/image verifies the manifest
against it, and every blob against the manifest) into
CACHE/e2b-images/REPOSITORY/sha256-HEX/ (REPOSITORY percent-encoded), an OCI
layout under the ref `image`, renamed into place only when complete. A
later build of the same repository and digest uses it, but only once the
registry has confirmed that the credentials in use can read that digest in
that repository (`skopeo inspect --raw docker://NAME@DIGEST`, the manifest's
sha256 the digest): a copy one tenant's credentials pulled is never another
template's without the registry's word. --offline refuses fromImage for
that reason; --trust-cache (make trust_image_cache=1, the operator's call)
uses a cached copy without asking, online or offline.

Prints one JSON object: base (the builder-mode spec, oci:PATH:image), name
(the repository, as the registry resolved it), digest, env (the image
config's Env: E2B's steps start with it, template/e2b/steps.py).

Exit 0 ok, 1 refused or failed (one message naming the reference and what to
do), 2 usage.
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import urllib.parse

from sandbox.termsafe import escape

LOCK = "e2b.template.lock"
LOCK_MAX = 64 * 1024
REF_IN_LAYOUT = "image"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# Docker's reference grammar (distribution/reference): [domain/]path[:tag][@digest].
_DOMAIN = r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
_PATH = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
REFERENCE = re.compile(rf"(?:{_DOMAIN}/)?{_PATH}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?")
# A pull of a large base over a slow link: skopeo's own limit, not ours.
PULL_TIMEOUT = "45m"
INSPECT_TIMEOUT = "5m"


class PullError(Exception):
    pass


def repository(ref: str) -> str:
    """REF's repository, normalised as Docker's reference library does
    (ParseNormalizedNamed): the tag and digest dropped, a name without a
    registry on docker.io, a one-part docker.io name under library/."""
    name = ref.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    name = f"{head}/{last.split(':', 1)[0]}" if head else last.split(":", 1)[0]
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first.lower() != first):
        domain, path = first, rest
    else:
        domain, path = "docker.io", name
    if domain == "index.docker.io":
        domain = "docker.io"
    if domain == "docker.io" and "/" not in path:
        path = f"library/{path}"
    return f"{domain}/{path}"


def skopeo(args: list, what: str, cert_dir: str | None, timeout: str) -> subprocess.CompletedProcess:
    """skopeo GLOBAL... CMD ARGS: its stderr, which carries the registry's
    words, escaped into the refusal."""
    cmd = ["skopeo", "--command-timeout", timeout, *args[:1]]
    if cert_dir and args[0] in ("inspect", "copy"):
        cmd += ["--src-cert-dir" if args[0] == "copy" else "--cert-dir", cert_dir]
    cmd += args[1:]
    try:
        cp = subprocess.run(cmd, capture_output=True)
    except FileNotFoundError:
        raise PullError("skopeo is not installed (make deps)") from None
    if cp.returncode != 0:
        err = cp.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PullError(f"{what}: skopeo {args[0]} failed: {' / '.join(err[-4:]) or 'no message'}")
    return cp


def read_lock(folder: str, ref: str, holder: str) -> dict | None:
    """DIR/e2b.template.lock, a regular file of the folder (never followed
    out of it), for REF, the fromImage of the template HOLDER (a lock
    without "template", as this build wrote them before, pins the folder's
    own template); None when there is none."""
    path = os.path.join(folder, LOCK)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PullError(f"{path}: cannot be read ({e.strerror}; a symlink is refused): "
                        f"delete it, and the build pins {ref} again") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PullError(f"{path}: not a regular file: delete it, and the build pins {ref} again")
        data = f.read(LOCK_MAX + 1)
    try:
        lock = json.loads(data) if len(data) <= LOCK_MAX else None
    except ValueError:
        lock = None
    if not (isinstance(lock, dict) and isinstance(lock.get("fromImage"), str) and isinstance(lock.get("name"), str)
            and isinstance(lock.get("digest"), str) and DIGEST.fullmatch(lock["digest"])
            and REFERENCE.fullmatch(lock["name"]) and "@" not in lock["name"]
            and (lock.get("template") is None or (isinstance(lock["template"], str)
                                                  and re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", lock["template"])))):
        raise PullError(f"{path}: not a lock this build wrote (an object with fromImage, name, a sha256 digest "
                        f"and the template it pins): delete it, and the build pins {ref} again")
    if lock["fromImage"] != ref:
        raise PullError(f"{path} pins fromImage '{lock['fromImage']}', but e2b.template.json's fromImage is "
                        f"'{ref}': delete the lock, and the build pins '{ref}' (or put fromImage back)")
    pins = lock.get("template", os.path.basename(os.path.realpath(folder)))
    if pins != holder:
        raise PullError(f"{path} pins the fromImage of template '{pins}', but '{ref}' is template '{holder}''s: "
                        f"delete the lock, and the build pins '{ref}' for '{holder}'")
    if lock["name"] != repository(ref):
        raise PullError(f"{path} pins repository '{lock['name']}', but fromImage '{ref}' names repository "
                        f"'{repository(ref)}': a lock pins a digest of fromImage's own repository; delete it, "
                        f"and the build pins '{ref}' again")
    return dict(lock, template=holder)


def write_lock(folder: str, lock: dict) -> str | None:
    """Writes the lock whole or not at all (a temporary file renamed over
    it). A folder the build may not write (a read-only checkout) is not an
    error: the pin is then printed for the user to keep."""
    path = os.path.join(folder, LOCK)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".e2b.template.lock.", dir=folder)
    except OSError as e:
        return f"not written ({e.strerror})"
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(lock, f, indent=2)
            f.write("\n")
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        return f"not written ({e.strerror})"
    return None


def resolve(ref: str, cert_dir: str | None) -> dict:
    """What REF names now: the repository it resolved in (skopeo's, through
    registries.conf) and the digest of the manifest (or index) it gets."""
    what = f"fromImage '{ref}'"
    raw = skopeo(["inspect", "--raw", f"docker://{ref}"], what, cert_dir, INSPECT_TIMEOUT).stdout
    info = skopeo(["inspect", "--no-tags", f"docker://{ref}"], what, cert_dir, INSPECT_TIMEOUT).stdout
    try:
        name = json.loads(info)["Name"]
    except (ValueError, KeyError, TypeError):
        raise PullError(f"{what}: skopeo inspect gave no repository name") from None
    if not isinstance(name, str) or not REFERENCE.fullmatch(name) or "@" in name:
        raise PullError(f"{what}: skopeo inspect named the repository '{name}', not a reference")
    if name != repository(ref):
        raise PullError(f"{what}: the registry resolved it in repository '{name}', not '{repository(ref)}' "
                        "(a mirror or alias in registries.conf?): write fromImage as that repository")
    return {"fromImage": ref, "name": name, "digest": "sha256:" + hashlib.sha256(raw).hexdigest()}


def confirm(lock: dict, cert_dir: str | None) -> None:
    """The registry's word that the credentials in use can read NAME@DIGEST:
    it serves that manifest, and the manifest hashes to the digest."""
    where = f"{lock['name']}@{lock['digest']}"
    what = (f"fromImage '{lock['fromImage']}': the registry {lock['name'].split('/', 1)[0]} did not confirm that "
            f"the credentials in use can read {where} (a copy in the cache is used only once it does)")
    raw = skopeo(["inspect", "--raw", f"docker://{where}"], what, cert_dir, INSPECT_TIMEOUT).stdout
    if "sha256:" + hashlib.sha256(raw).hexdigest() != lock["digest"]:
        raise PullError(f"{what}: the manifest it served does not hash to that digest")


def config_env(layout: str, what: str) -> dict:
    """The image config's Env, as E2B's build reads it (oci.ParseEnvs:
    split at the first '=', entries without one dropped)."""
    cp = skopeo(["inspect", "--config", f"oci:{layout}:{REF_IN_LAYOUT}"], what, None, INSPECT_TIMEOUT)
    try:
        env = (json.loads(cp.stdout).get("config") or {}).get("Env") or []
    except (ValueError, AttributeError):
        raise PullError(f"{what}: its image config is not JSON") from None
    if not isinstance(env, list):
        raise PullError(f"{what}: its image config's Env is not a list")
    out = {}
    for entry in env:
        if isinstance(entry, str) and "=" in entry:
            k, v = entry.split("=", 1)
            out[k] = v
    return out


def cached(lock: dict, cache: str) -> str:
    """Where NAME@DIGEST is (or goes) in the cache: by repository and digest."""
    return os.path.join(cache, "e2b-images", urllib.parse.quote(lock["name"], safe=""),
                        lock["digest"].replace(":", "-"))


def pull(lock: dict, cache: str, cert_dir: str | None) -> str:
    """NAME@DIGEST into the cache (kept from an earlier pull of that
    repository when there); returns the layout."""
    final = cached(lock, cache)
    if os.path.isfile(os.path.join(final, "index.json")):
        return final
    top = os.path.dirname(final)
    os.makedirs(top, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".pull-", dir=top)
    try:
        layout = os.path.join(tmp, "layout")
        skopeo(["copy", "--quiet", "--retry-times", "3", "--tmpdir", tmp,
                f"docker://{lock['name']}@{lock['digest']}", f"oci:{layout}:{REF_IN_LAYOUT}"],
               f"fromImage '{lock['fromImage']}' ({lock['name']}@{lock['digest']})", cert_dir, PULL_TIMEOUT)
        try:
            os.rename(layout, final)
        except OSError:
            # Another build put the same digest there first: the same bytes.
            if not os.path.isfile(os.path.join(final, "index.json")):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m template.e2b.pull")
    ap.add_argument("--ref", help="the Template JSON's fromImage")
    ap.add_argument("--template", required=True, help="the template= folder (where the lock is)")
    ap.add_argument("--holder", help="the template whose fromImage REF is (default: the folder's own)")
    ap.add_argument("--cache")
    ap.add_argument("--offline", action="store_true", help="offline=1: no registry to confirm access")
    ap.add_argument("--trust-cache", action="store_true",
                    help="trust_image_cache=1: a cached copy is used without the registry's confirmation")
    ap.add_argument("--cert-dir", help="the registry's CA certificates (else certs.d)")
    ap.add_argument("--registry-auth", help="fromImageRegistry's type, if the JSON has one")
    ap.add_argument("--write-lock", metavar="PULLED",
                    help="after the build succeeded: write the new pin in PULLED (this script's output) as the lock")
    a = ap.parse_args(argv)
    if a.write_lock:
        return commit_lock(a.write_lock, a.template)
    if not (a.ref and a.cache):
        ap.error("--ref and --cache are needed to pull")
    ref = a.ref
    try:
        if not REFERENCE.fullmatch(ref):
            raise PullError(f"fromImage '{ref}': not an image reference ([registry/]name[:tag][@digest])")
        if a.registry_auth:
            print(escape(f"template: fromImage '{ref}': fromImageRegistry ({a.registry_auth}) is given; its "
                         f"credentials are not used. The pull takes them from the auth file "
                         f"(REGISTRY_AUTH_FILE, or `skopeo login` for the registry)"), file=sys.stderr)
        holder = a.holder or os.path.basename(os.path.realpath(a.template))
        lock = read_lock(a.template, ref, holder)
        new_lock = None
        if "@" in ref:
            # Pinned by the reference itself; the digest is what is pulled.
            lock = {"fromImage": ref, "name": repository(ref), "digest": ref.split("@", 1)[1], "template": holder}
        elif lock is None:
            if a.offline:
                raise PullError(f"fromImage '{ref}': offline=1, but the tag has no lock in {a.template} yet, and "
                                f"only its registry can say which digest it names: build once without offline=1")
            lock = new_lock = dict(resolve(ref, a.cert_dir), template=holder)
            print(escape(f"template: fromImage '{ref}' resolved to {lock['name']}@{lock['digest']}"), file=sys.stderr)
        what = f"fromImage '{ref}' ({lock['name']}@{lock['digest']})"
        have = os.path.isfile(os.path.join(cached(lock, a.cache), "index.json"))
        if a.trust_cache and have:
            print(escape(f"template: {what}: from the cache, unconfirmed by the registry (trust_image_cache=1)"),
                  file=sys.stderr)
        elif a.offline and a.trust_cache:
            raise PullError(f"{what}: offline=1, and it is not in the cache {a.cache} (trust_image_cache=1 uses "
                            f"a cached copy only): build once without offline=1")
        elif a.offline:
            raise PullError(f"{what}: offline=1, but fromImage needs its registry to confirm that the credentials "
                            f"in use can read that digest before a copy in the cache is used: build without "
                            f"offline=1, or, where every template this build host builds may read every image in "
                            f"its cache, trust_image_cache=1")
        elif new_lock is None:
            # A lock's digest, or fromImage's own: the registry vouches for the
            # credentials before a cached copy is used (a pull checks as it copies).
            confirm(lock, a.cert_dir)
        layout = pull(lock, a.cache, a.cert_dir)
        env = config_env(layout, what)
    except PullError as e:
        print(escape(f"template: {e}"), file=sys.stderr)
        return 1
    except OSError as e:
        print(escape(f"template: fromImage '{ref}': {e.filename or a.cache}: {e.strerror}"), file=sys.stderr)
        return 1
    json.dump({"base": f"oci:{layout}:{REF_IN_LAYOUT}", "name": lock["name"], "digest": lock["digest"],
               "env": env, "new_lock": new_lock}, sys.stdout, sort_keys=True)
    print()
    return 0


def commit_lock(pulled: str, folder: str) -> int:
    """The pin a build resolved, kept once the build succeeded (a failed
    build leaves the folder as it was)."""
    with open(pulled, encoding="utf-8") as f:
        lock = json.load(f).get("new_lock")
    if not lock:
        return 0
    path = os.path.join(folder, LOCK)
    failed = write_lock(folder, lock)
    if failed:
        print(escape(f"template: {path} {failed}: fromImage '{lock['fromImage']}' is not pinned; the next "
                     f"build resolves the tag again (keep {lock['name']}@{lock['digest']} by writing fromImage "
                     f"with that digest)"), file=sys.stderr)
    else:
        print(escape(f"template: fromImage '{lock['fromImage']}' pinned to {lock['digest']} in {path} "
                     f"(commit it; delete it to build on the tag's newest image)"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
