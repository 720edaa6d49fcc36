"""The labels (OCI config) and annotations (OCI manifest) every image carries.

Two sets of keys, both as strings:

  org.opencontainers.image.*   the standard keys of the OCI image spec:
      title, description, version, revision, source, created, licenses,
      base.name, base.digest
  org.e2b-images.*             ours (os-image/README.md, "Labels"):
      name, flavor, distro, envd-version, guarded-ports, vsock-ports,
      kernels (e2b-ci), vcpu, memory-mb, ready, ready-timeout,
      envd-user, envd-workdir (an E2B template: its steps' last USER and
      WORKDIR, which E2B's build makes envd's defaults)

What the image itself decides is read from the packed tree, so a label can
never disagree with the image: the envd version from /etc/envd-version, the
guarded ports from /etc/e2b/guarded-ports, the vsock ports from the socket
units systemd enables, the Jupyter kernels from the kernelspecs on Jupyter's
path (kernels()), an E2B template's envd defaults from the context its steps
left (envd_defaults()). The rest comes from build.sh's meta file (META_KEYS).
`created` is SOURCE_DATE_EPOCH, so the labels keep builds reproducible.

The tree is a template's or a base's, hostile input: every path in it is
resolved inside it (sandbox/inroot.py: an absolute symlink means what it
means in the guest, never a file of the build machine), and a file is read
only if it is a regular file, up to a bound (a link to a fifo, or to
/dev/zero, reads nothing).
"""
import contextlib
import argparse
import json
import os
import re
import subprocess
import sys
import time

from sandbox import inroot

PREFIX = "org.e2b-images."
OCI = "org.opencontainers.image."
# build.sh's meta file: every key required, "" where it has no value.
META_KEYS = ("name", "flavor", "description", "version", "revision", "source", "licenses",
             "base_name", "base_digest", "vcpu", "memory_mb", "ready", "ready_timeout")
UNIT_DIRS = ("etc/systemd/system", "usr/lib/systemd/system")
SMALL = 1 << 20   # a unit, a kernelspec, a one-line file


@contextlib.contextmanager
def tree_root(tree: str):
    """The tree's root directory (not through a link), for inroot."""
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


def read_text(rootfd: int, path: str) -> str:
    """A small regular file of the tree (inroot.read_regular), as text."""
    return inroot.read_regular(rootfd, path, SMALL).decode("utf-8", "replace")


def listing(rootfd: int, path: str) -> list:
    """The names in the tree's directory PATH, sorted; [] if it is none."""
    try:
        fd = inroot.open_dir(rootfd, path, missing_ok=True)
    except OSError:
        return []
    if fd is None:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def is_regular(rootfd: int, path: str) -> bool:
    try:
        os.close(inroot.open_regular(rootfd, path))
        return True
    except OSError:
        return False


class LabelError(Exception):
    pass


def read_meta(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        meta = json.load(f)
    missing = [k for k in META_KEYS if k not in meta]
    if missing:
        raise LabelError(f"{path}: missing {', '.join(missing)}")
    return {k: str(meta[k]) for k in META_KEYS}


def envd_version(rootfd: int, tree: str) -> str:
    path = "etc/envd-version"
    try:
        v = read_text(rootfd, path).strip()
    except OSError as e:
        raise LabelError(f"{tree}/{path}: {e.strerror}: the image has no envd version") from None
    if not v:
        raise LabelError(f"{tree}/{path}: empty")
    return v


def guarded_ports(rootfd: int, tree: str) -> str:
    path = "etc/e2b/guarded-ports"
    try:
        text = read_text(rootfd, path)
    except OSError as e:
        raise LabelError(f"{tree}/{path}: {e.strerror}: the image has no guarded ports") from None
    for line in text.splitlines():
        m = re.fullmatch(r"E2B_GUARDED_PORTS=([0-9,]+)", line.strip())
        if m:
            return m.group(1)
    raise LabelError(f"{tree}/{path}: no E2B_GUARDED_PORTS= line")


def _unit_text(rootfd: int, name: str) -> str | None:
    """The file systemd would load for NAME (an instance loads its template)."""
    candidates = [name]
    m = re.fullmatch(r"([^@]+@)[^.]+(\.[a-z]+)", name)
    if m:
        candidates.append(m.group(1) + m.group(2))
    for d in UNIT_DIRS:
        for c in candidates:
            try:
                return read_text(rootfd, f"{d}/{c}")
            except OSError:
                continue
    return None


def vsock_ports(rootfd: int) -> str:
    """Ports of ListenStream=vsock::N in every socket unit enabled in the tree
    (a *.wants/ link under /etc/systemd/system), %i replaced by the instance."""
    ports = set()
    etc = "etc/systemd/system"
    for wants in listing(rootfd, etc):
        if not wants.endswith(".wants"):
            continue
        for name in listing(rootfd, f"{etc}/{wants}"):
            if not name.endswith(".socket"):
                continue
            text = _unit_text(rootfd, name)
            if text is None:
                continue
            instance = name.split("@", 1)[1].rsplit(".", 1)[0] if "@" in name else ""
            for line in text.splitlines():
                m = re.fullmatch(r"ListenStream=vsock::(\S+)", line.strip())
                if m:
                    port = m.group(1).replace("%i", instance)
                    if port.isdigit():
                        ports.add(int(port))
    return ",".join(str(p) for p in sorted(ports))


# Jupyter's kernel directories in an e2b-ci tree, searched as Jupyter searches
# them (the venv's first), and the names of upstream's make_template(kernels=)
# for the kernelspecs the server asks for (python3 is reached as "python").
KERNEL_DIRS = ("usr/lib/e2b-code-interpreter/venv/share/jupyter/kernels",
               "usr/local/share/jupyter/kernels", "usr/share/jupyter/kernels")
KERNEL_NAMES = {"python3": "python", "javascript": "javascript", "r": "r", "bash": "bash", "java": "java"}
KERNEL_ORDER = ("python", "javascript", "r", "bash", "java")


def kernels(rootfd: int) -> list:
    """The kernels an e2b-ci tree registers: upstream's, in make_template's
    order, then any other kernelspec (a template's own) by its name, sorted;
    [] for a tree without Jupyter kernels."""
    found, others = set(), set()
    for d in KERNEL_DIRS:
        for name in listing(rootfd, d):
            if is_regular(rootfd, f"{d}/{name}/kernel.json"):
                if name in KERNEL_NAMES:
                    found.add(KERNEL_NAMES[name])
                else:
                    others.add(name)
    return [k for k in KERNEL_ORDER if k in found] + sorted(others)


# template/e2b/steps.py's record of the context the steps left.
E2B_CONTEXT = "usr/lib/e2b-template/context.json"
ACCOUNT = re.compile(r"[a-z_][a-z0-9_-]{0,31}")


def envd_defaults(rootfd: int, tree: str) -> tuple[str, str]:
    """An E2B template's envd default user and workdir (its last USER and
    WORKDIR; no WORKDIR: none, the user's home), as E2B's build passes them
    to envd's /init. Read inside the tree (a RUN step could have put a
    symlink there) and checked, since the steps could have rewritten it."""
    try:
        data = inroot.read_regular(rootfd, E2B_CONTEXT, 64 * 1024)
    except FileNotFoundError:
        return "", ""
    except OSError as e:
        raise LabelError(f"{tree}/{E2B_CONTEXT}: {e.strerror} (a step replaced it?)") from None
    try:
        ctx = json.loads(data)
        user, workdir = ctx["user"], ctx["workdir"] or ""
    except (ValueError, KeyError, TypeError):
        raise LabelError(f"{tree}/{E2B_CONTEXT}: not the context the steps left (a step rewrote it?)") from None
    if not (isinstance(user, str) and ACCOUNT.fullmatch(user)):
        raise LabelError(f"{tree}/{E2B_CONTEXT}: user {user!r} is not an account name")
    if not (isinstance(workdir, str) and (workdir == "" or (workdir.startswith("/") and len(workdir) < 4096
                                                            and workdir.isprintable()))):
        raise LabelError(f"{tree}/{E2B_CONTEXT}: workdir {workdir!r} is not an absolute path")
    return user, workdir


def archive_base(distro: str, release: str, archive: dict) -> tuple[str, str]:
    """A flavor is built from the Debian archive, not from an image: its base
    is that archive's suite, pinned by the sha256 of the InRelease it was
    installed from (manifest.json's archive.suites[0]); no digest when the
    build kept no InRelease."""
    suites = archive.get("suites") or [{}]
    digest = suites[0].get("inrelease_sha256")
    return f"{distro}/{release}", f"sha256:{digest}" if digest else ""


def labels(tree: str, meta: dict, epoch: int, distro: str, release: str, archive: dict) -> dict:
    """Every label, by key; empty values are left out (e.g. no source URL)."""
    with tree_root(tree) as rootfd:
        return _labels(rootfd, tree, meta, epoch, distro, release, archive)


def _labels(rootfd: int, tree: str, meta: dict, epoch: int, distro: str, release: str, archive: dict) -> dict:
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
    if not meta["base_name"]:
        meta = dict(meta)
        meta["base_name"], meta["base_digest"] = archive_base(distro, release, archive)
    out = {
        OCI + "title": meta["name"],
        OCI + "description": meta["description"],
        OCI + "version": meta["version"],
        OCI + "revision": meta["revision"],
        OCI + "source": meta["source"],
        OCI + "created": created,
        OCI + "licenses": meta["licenses"],
        OCI + "base.name": meta["base_name"],
        OCI + "base.digest": meta["base_digest"],
        PREFIX + "name": meta["name"],
        PREFIX + "flavor": meta["flavor"],
        PREFIX + "distro": f"{distro}/{release}",
        PREFIX + "envd-version": envd_version(rootfd, tree),
        PREFIX + "guarded-ports": guarded_ports(rootfd, tree),
        PREFIX + "vsock-ports": vsock_ports(rootfd),
        PREFIX + "kernels": ",".join(kernels(rootfd)),
        PREFIX + "vcpu": meta["vcpu"],
        PREFIX + "memory-mb": meta["memory_mb"],
        PREFIX + "ready": meta["ready"],
        PREFIX + "ready-timeout": meta["ready_timeout"],
    }
    out[PREFIX + "envd-user"], out[PREFIX + "envd-workdir"] = envd_defaults(rootfd, tree)
    return {k: v for k, v in out.items() if v != ""}


def git(repo: str, *args: str) -> str:
    cp = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    return cp.stdout.strip() if cp.returncode == 0 else ""


def write_meta(argv) -> int:
    """labels.py --flavor F [--template JSON] --repo TOP --out FILE: build.sh's
    meta file, from os-image/flavors.json (a flavor's defaults) and the
    template's JSON (build/e2b-template --json), which overrides them."""
    ap = argparse.ArgumentParser(prog="labels.py")
    ap.add_argument("--flavor", required=True)
    ap.add_argument("--template", help="the template's JSON, from build/e2b-template")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--source", default="", help="the repository's URL (make source_url=)")
    ap.add_argument("--base", help="builder mode: os-image/builder_base.py's JSON (the base image's name and digest)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    flavors_json = os.path.join(os.path.dirname(os.path.abspath(__file__)), "flavors.json")
    with open(flavors_json, encoding="utf-8") as f:
        flavors = json.load(f)
    if a.flavor not in flavors:
        print(f"labels: flavor {a.flavor}: not in {flavors_json}", file=sys.stderr)
        return 1
    d = flavors[a.flavor]
    meta = {"name": a.flavor, "flavor": a.flavor, "description": d["description"],
            "vcpu": d["vcpu"], "memory_mb": d["memory_mb"], "ready": d["ready"],
            "ready_timeout": d["ready_timeout"]}
    if a.template:
        with open(a.template, encoding="utf-8") as f:
            t = json.load(f)
        meta["name"] = t["name"]
        meta["description"] = t.get("description") or f"{t['name']}: a template on {a.flavor}"
        for k in ("vcpu", "memory_mb", "ready", "ready_timeout"):
            if t.get(k) not in (None, ""):
                meta[k] = t[k]
    meta.update({
        "revision": git(a.repo, "rev-parse", "HEAD"),
        "version": git(a.repo, "describe", "--tags", "--always", "--dirty"),
        "source": a.source,
        # No single license covers an image of Debian packages: each package's
        # terms are in its /usr/share/doc/<package>/copyright (SPDX NOASSERTION).
        "licenses": "NOASSERTION",
        "base_name": "", "base_digest": "",
    })
    if a.base:
        with open(a.base, encoding="utf-8") as f:
            b = json.load(f)
        meta["base_name"], meta["base_digest"] = b["name"], b["digest"]
        if not a.template:
            meta["description"] = f"{d['description']}, installed onto the image {b['name']}"

    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({k: meta[k] for k in META_KEYS}, f, sort_keys=True, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(write_meta(sys.argv[1:]))
