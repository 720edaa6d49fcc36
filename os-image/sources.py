#!/usr/bin/python3
"""Write the apt sources mkosi builds from (deb822), and nothing else.

mkosi 24.3 adds repositories of its own (debian-debug, which answers 400 on
our mirrors) unless mkosi.pkgmngr/etc/apt/sources.list.d/mkosi.sources
exists, in which case it uses that file verbatim. So we always write it.

No archive host name lives in this repository. The URIs come from, in order:
  --mirror URI [--security-mirror URI]        the user's choice (mirror=)
  --snapshot STAMP [--snapshot-base URI]      an archive snapshot (snapshot=)
  the machine's own apt configuration         /etc/apt/sources.list{,.d/*}

A snapshot base is the URI up to and excluding the archive name, i.e.
<base>/debian/<STAMP> and <base>/debian-security/<STAMP> are the archives.
Without --snapshot-base it is read from a commented snapshot URI in the
machine's apt sources (Debian's deb822 files carry one, e.g.
"# http://<snapshot host>/archive/debian/20250520T000000Z").

Usage: sources.py --distro D --release R --output FILE [--mirror URI]
                  [--security-mirror URI] [--snapshot STAMP] [--snapshot-base URI]
                  [--apt-root DIR] [--print-json]
Exit 0 ok, 1 no usable source found (message names what to pass), 2 usage.
"""
import argparse
import glob
import json
import os
import re
import sys

KEYRINGS = {
    "debian": "/usr/share/keyrings/debian-archive-keyring.gpg",
    "ubuntu": "/usr/share/keyrings/ubuntu-archive-keyring.gpg",
}
COMPONENTS = {"debian": "main", "ubuntu": "main universe"}
STAMP_RE = re.compile(r"^\d{8}T\d{6}Z$")


def parse_deb822(text):
    """Yield (fields, comments) per stanza of a .sources file."""
    stanza, comments = {}, []
    key = None
    for line in text.splitlines() + [""]:
        if not line.strip():
            if stanza:
                yield stanza, comments
            stanza, comments, key = {}, [], None
        elif line.startswith("#"):
            comments.append(line[1:].strip())
        elif line[0] in " \t" and key:
            stanza[key] += " " + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            key = key.strip().lower()
            stanza[key] = value.strip()


def machine_sources(apt_root):
    """[(uri, suites, comments)] of the machine's enabled deb sources."""
    found = []
    for path in sorted(glob.glob(os.path.join(apt_root, "sources.list.d", "*.sources"))):
        with open(path, encoding="utf-8") as f:
            for st, comments in parse_deb822(f.read()):
                if "deb" not in st.get("types", "").split() or st.get("enabled", "yes") == "no":
                    continue
                for uri in st.get("uris", "").split():
                    found.append((uri.rstrip("/"), st.get("suites", "").split(), comments))
    lists = [os.path.join(apt_root, "sources.list")]
    lists += sorted(glob.glob(os.path.join(apt_root, "sources.list.d", "*.list")))
    for path in lists:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()
                if len(words) >= 3 and words[0] == "deb":
                    found.append((words[1].rstrip("/"), [words[2]], []))
    return found


def pick_mirrors(found):
    """The machine's main archive URI and its security archive URI."""
    main = security = None
    for uri, suites, _ in found:
        if any(s.endswith("-security") for s in suites) or uri.endswith("-security"):
            security = security or uri
        elif suites:
            main = main or uri
    return main, security


def snapshot_base_from(found):
    for _, _, comments in found:
        for c in comments:
            m = re.match(r"^(\S+?)/debian/\d{8}T\d{6}Z/?$", c)
            if m:
                return m.group(1)
    return None


def render(distro, release, main, security, snapshot):
    keyring = KEYRINGS[distro]
    comps = COMPONENTS[distro]
    extra = "Check-Valid-Until: no\n" if snapshot else ""
    out = [
        f"Types: deb\nURIs: {main}\nSuites: {release} {release}-updates\n"
        f"Components: {comps}\nSigned-By: {keyring}\n{extra}"
    ]
    if security:
        out.append(
            f"Types: deb\nURIs: {security}\nSuites: {release}-security\n"
            f"Components: {comps}\nSigned-By: {keyring}\n{extra}"
        )
    return "# Written by os-image/sources.py at build time; not committed.\n\n" + "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(prog="sources.py")
    ap.add_argument("--distro", default="debian", choices=sorted(KEYRINGS))
    ap.add_argument("--release", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--mirror", default="")
    ap.add_argument("--security-mirror", default="")
    ap.add_argument("--snapshot", default="")
    ap.add_argument("--snapshot-base", default="")
    ap.add_argument("--apt-root", default="/etc/apt")
    ap.add_argument("--print-json", action="store_true")
    a = ap.parse_args(argv)

    found = machine_sources(a.apt_root)
    if a.snapshot:
        if not STAMP_RE.match(a.snapshot):
            print(f"sources.py: snapshot={a.snapshot}: expected YYYYMMDDTHHMMSSZ", file=sys.stderr)
            return 2
        base = (a.snapshot_base or snapshot_base_from(found) or "").rstrip("/")
        if not base:
            print("sources.py: snapshot=: no snapshot service known; pass snapshot_base=URI "
                  "(the URI before /debian/<stamp>)", file=sys.stderr)
            return 1
        main_uri = f"{base}/{a.distro}/{a.snapshot}"
        sec_uri = f"{base}/{a.distro}-security/{a.snapshot}" if a.distro == "debian" else ""
    elif a.mirror:
        main_uri = a.mirror.rstrip("/")
        sec_uri = a.security_mirror.rstrip("/")
        if not sec_uri and a.distro == "debian":
            # Debian's security archive sits next to the main one on most mirrors.
            sec_uri = main_uri + "-security"
        elif not sec_uri:
            sec_uri = main_uri  # Ubuntu mirrors carry <release>-security too
    else:
        if a.distro != "debian":
            print(f"sources.py: distro={a.distro}: the machine's apt sources are Debian's; "
                  "pass mirror=URI", file=sys.stderr)
            return 1
        main_uri, sec_uri = pick_mirrors(found)
        sec_uri = a.security_mirror.rstrip("/") or sec_uri or ""
        if not main_uri:
            print(f"sources.py: no deb source in {a.apt_root}; pass mirror=URI", file=sys.stderr)
            return 1
    if a.release in ("sid", "unstable"):
        sec_uri = ""
    text = render(a.distro, a.release, main_uri, sec_uri, a.snapshot)
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(text)
    if a.print_json:
        suites = [a.release, f"{a.release}-updates"]
        archives = [{"uri": main_uri, "suite": s} for s in suites]
        if sec_uri:
            archives.append({"uri": sec_uri, "suite": f"{a.release}-security"})
        print(json.dumps({"snapshot": a.snapshot or None, "archives": archives}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
