"""The files of an E2B Template JSON's COPY steps, read from the template's
folder as E2B's SDKs read them, checked against the step's filesHash, and
staged for the build.

A COPY step is `{"type": "COPY", "args": [src, dest, owner, mode],
"filesHash": H}`. The SDK (Python `e2b` 2.63.0, JS `e2b` 2.51.0) lists the
files of `src` (a path or a glob, relative to the template's folder, less
what `.dockerignore` excludes), hashes them into H, and uploads them as a
tar of folder-relative paths. E2B's build takes the entry at src's static
prefix (the part before the first glob character) from that tar and puts it
at dest. Here the folder is read the same way, the hash is computed again
(the Python SDK's recipe, or the JS SDK's, which also hashes directories'
sizes), and a step whose hash differs is refused, naming the likely causes
(MISMATCH_CAUSES: an older SDK's recipe, fileIgnorePatterns, other files).

Nothing outside the folder is read: every listed path, resolved, must stay
inside it (a symlink that leads out is refused, unless the step copies the
link itself, which is only a name in the image).
"""
import hashlib
import os
import re
import shutil
import stat

GLOB_CHARS = "*?[{"
# Why a step's files may not hash as its JSON says. The versions are where
# the published SDKs (`e2b` on PyPI and npm) changed their recipe: both
# before 2.6.3 hashed each file's uid, gid and mtime; Python before 2.52
# hashed a directory's size and `.` as "."; JS before 2.30.2 put a
# directory's files in another order. fileIgnorePatterns are applied by the
# SDK and written nowhere, so the files they left out are hashed here.
MISMATCH_CAUSES = (
    "Likely causes: (1) the JSON was written by an older SDK, which hashed differently: e2b for Python "
    "before 2.52 (a directory or '.') or for JS before 2.30.2 (a directory), and both before 2.6.3 (every "
    "file, with its owner and modification time, which only the machine that wrote the JSON matches); "
    "(2) the template's fileIgnorePatterns (Python: file_ignore_patterns) left files out of the hash, and "
    "they are not in the JSON: put those patterns in the folder's .dockerignore instead; (3) the folder is "
    "not the one the JSON was written from, or has changed since (or is partial). Write the JSON again from "
    "this folder with a current SDK (Template.to_json(t) / Template.toJSON(t); e2b 2.63.0 for Python and "
    "2.51.0 for JS are tested)")


class CopyError(ValueError):
    pass


# .dockerignore, as Docker reads it: one pattern a line, '#' lines and blank
# lines skipped, '!' re-includes, the last matching pattern wins, and a
# pattern matching a directory matches everything below it.
def _pattern_regex(pattern: str) -> re.Pattern:
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):  # "**/" also matches no directory at all
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern.startswith("[!", i) or pattern.startswith("[^", i) else i + 1)
            if j < 0:
                raise CopyError(f".dockerignore: pattern '{pattern}' has '[' without ']'")
            body = pattern[i + 1:j]
            if body[:1] in ("!", "^"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


class IgnoreMatcher:
    def __init__(self, patterns):
        self.rules = []
        for p in patterns:
            p = p.strip()
            if not p or p.startswith("#"):
                continue
            exclude = p.startswith("!")
            if exclude:
                p = p[1:].strip()
            p = os.path.normpath(p).lstrip("/")
            if p in ("", "."):
                continue
            self.rules.append((exclude, _pattern_regex(p)))
        self.reincludes = any(ex for ex, _ in self.rules)

    def ignored(self, rel: str) -> bool:
        """rel (folder-relative, '/'-separated) or one of its parents matches."""
        parents = rel.split("/")
        candidates = ["/".join(parents[:k]) for k in range(1, len(parents) + 1)]
        result = False
        for exclude, rx in self.rules:
            if any(rx.match(c) for c in candidates):
                result = not exclude
        return result

    def ignored_js(self, rel: str) -> bool:
        """As the JS SDK's node-glob reads the same patterns: no '!', and a
        pattern drops only the paths it matches itself."""
        return any(not exclude and rx.match(rel) for exclude, rx in self.rules)

    @classmethod
    def of_folder(cls, folder: str) -> "IgnoreMatcher":
        path = os.path.join(folder, ".dockerignore")
        if not os.path.lexists(path):
            return cls([])
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
            raise CopyError(f"{path}: not a regular file of at most 1 MiB")
        with open(path, encoding="utf-8-sig") as f:
            return cls(f.read().split("\n"))


def static_prefix(src: str) -> str:
    """src's leading components without a glob character ('' for none)."""
    parts = []
    for part in src.split("/"):
        if any(c in part for c in GLOB_CHARS):
            break
        parts.append(part)
    return os.path.normpath("/".join(parts)) if parts else ""


def _inside(folder: str, path: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def _glob(folder: str, src: str) -> list:
    """Folder-relative matches of src: '*', '?', '[...]' within a name, '**'
    across directories, dot files included (as the SDKs' glob, GLOBSTAR and
    DOTMATCH). Directories reached through symlinks are not searched."""
    src = os.path.normpath(src)
    if not any(c in src for c in GLOB_CHARS):
        return [src] if os.path.lexists(os.path.join(folder, src)) else []
    rx = _pattern_regex(src)
    prefix = static_prefix(src)
    start = os.path.join(folder, prefix) if prefix else folder
    out = []
    if not os.path.isdir(start) or os.path.islink(start):
        return out
    # os.walk lists a symlink to a directory among dirs and does not descend into it.
    for root, dirs, files in os.walk(start):
        for name in dirs + files:
            rel = os.path.relpath(os.path.join(root, name), folder)
            if rx.match(rel):
                out.append(rel)
    return sorted(set(out))


def list_files(folder: str, src: str, ignore: IgnoreMatcher) -> list:
    """The folder-relative paths the SDK hashes and uploads for src, sorted
    as the Python SDK sorts them (by absolute path)."""
    found = set()

    def walk(rel_dir: str):
        base = os.path.join(folder, rel_dir) if rel_dir != "." else folder
        for e in os.scandir(base):
            rel = e.name if rel_dir == "." else f"{rel_dir}/{e.name}"
            ign = ignore.ignored(rel)
            if not ign:
                found.add(rel)
            if e.is_dir(follow_symlinks=False) and (not ign or ignore.reincludes):
                walk(rel)

    matches = _glob(folder, src)
    matches.sort(key=lambda r: 0 if r == "." else r.count("/") + 1)
    walked = []
    for rel in matches:
        if "." in walked or any(rel.startswith(w + "/") for w in walked):
            continue
        if rel != "." and ignore.ignored(rel):
            continue
        path = os.path.join(folder, rel)
        found.add(rel)
        if os.path.isdir(path) and not os.path.islink(path):
            walk(rel)
            walked.append(rel)
    return _sdk_order(folder, found)


def _sdk_order(folder: str, rels: set) -> list:
    """rels sorted as both SDKs sort what they hash: by absolute path."""
    return sorted(rels, key=lambda r: folder if r == "." else os.path.join(folder, r))


def list_files_js(folder: str, src: str, ignore: IgnoreMatcher) -> list:
    """The same as the JS SDK lists it: a matched directory brings everything
    below it; ignore.ignored_js drops a path on its own."""
    found = set()
    for rel in _glob(folder, src):
        if rel != "." and ignore.ignored_js(rel):
            continue
        found.add(rel)
        path = os.path.join(folder, rel)
        if os.path.isdir(path) and not os.path.islink(path):
            for root, dirs, files in os.walk(path):
                for name in dirs + files:
                    sub = os.path.relpath(os.path.join(root, name), folder)
                    if not ignore.ignored_js(sub):
                        found.add(sub)
    return _sdk_order(folder, found)


def check_inside(folder: str, rels: list, resolve_symlinks: bool, what: str) -> None:
    for rel in rels:
        path = os.path.join(folder, rel)
        mode = os.lstat(path).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            # A fifo would hold the build reading it; a device is no file of a template's.
            raise CopyError(f"{what}: {rel} is not a regular file, a directory or a symlink")
        parent = os.path.realpath(os.path.dirname(path))
        if not _inside(folder, parent):
            raise CopyError(f"{what}: {rel} is reached through a symlink that leads out of the template's folder")
        if os.path.islink(path) and resolve_symlinks and not _inside(folder, os.path.realpath(path)):
            raise CopyError(f"{what}: {rel} is a symlink out of the template's folder and the step resolves "
                            f"symlinks; copy the file into the folder")


def files_hash(folder: str, src: str, dest: str, rels: list, resolve_symlinks: bool, js: bool = False) -> str:
    """The SDK's filesHash of the listed files (js: the JS SDK's, which also
    hashes a directory's size)."""
    h = hashlib.sha256(f"COPY {src} {dest}".encode())
    for rel in rels:
        path = os.path.join(folder, rel)
        h.update(("" if js and rel == "." else rel).encode())
        st = os.lstat(path)
        if stat.S_ISLNK(st.st_mode) and not (resolve_symlinks and (os.path.isfile(path) or os.path.isdir(path))):
            h.update(str(st.st_mode).encode())
            h.update(str(st.st_size).encode())
            h.update(os.readlink(path).encode())
            continue
        st = os.stat(path)
        h.update(str(st.st_mode).encode())
        if js or not stat.S_ISDIR(st.st_mode):
            h.update(str(st.st_size).encode())
        if stat.S_ISREG(st.st_mode):
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def read_step(folder: str, step: dict, ignore: IgnoreMatcher) -> tuple:
    """The step's files and whether its symlinks are resolved, checked:
    inside the folder, and hashing to its filesHash by either SDK's recipe.
    Raises CopyError naming the step."""
    src, dest = step["args"][0], step["args"][1]
    what = f"step {step['index']}: COPY {src}"
    # Nothing outside the folder is listed or read: the directory the source
    # starts in first, then every listed path, each before its bytes are
    # hashed (a link to /proc/kmsg or a fifo would hold the build).
    prefix = static_prefix(src)
    if prefix not in ("", ".") and not _inside(folder, os.path.realpath(os.path.dirname(os.path.join(folder,
                                                                                                     prefix)))):
        raise CopyError(f"{what}: {prefix} is reached through a symlink that leads out of the template's folder")
    rels = list_files(folder, src, ignore)
    if not rels:
        raise CopyError(f"{what}: no files in the template's folder match it (less .dockerignore's); "
                        f"the folder is not the one the JSON was written from")
    # The JS SDK writes resolveSymlinks; the Python SDK hashes with it but
    # does not write it, so without it both are tried (the hash says which).
    resolves = [step["resolveSymlinks"]] if "resolveSymlinks" in step else [False, True]
    refused = None
    for js in (False, True):  # the JS listing walks the folder again: only when the Python one fails
        listed = list_files_js(folder, src, ignore) if js else rels
        for resolve in resolves:
            if not listed:
                continue
            try:
                check_inside(folder, listed, resolve, what)
            except CopyError as e:
                refused = refused or e
                continue
            if files_hash(folder, src, dest, listed, resolve, js) == step["filesHash"]:
                return listed, resolve
    if refused:
        raise refused
    if "e2b.template.json" in rels:
        raise CopyError(f"{what}: its files do not hash to the step's filesHash, and they include "
                        f"e2b.template.json, which the SDK hashed before it was written: add e2b.template.json "
                        f"to the folder's .dockerignore and write the JSON again")
    raise CopyError(f"{what}: its files do not hash to the step's filesHash. {MISMATCH_CAUSES}")


def stage_step(folder: str, step: dict, rels: list, out: str) -> str:
    """Copies the step's files to out at their folder-relative paths (as the
    SDK's tar has them) and returns the entry E2B's build copies: out's path
    at src's static prefix."""
    resolve = step.get("resolveSymlinks", False)
    os.makedirs(out, exist_ok=True)
    for rel in rels:
        path, target = os.path.join(folder, rel), os.path.join(out, rel)
        if rel == ".":
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(path) and not (resolve and os.path.exists(path)):
            os.symlink(os.readlink(path), target)
        elif os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
            shutil.copymode(path, target)
        else:
            shutil.copy2(path, target, follow_symlinks=True)
    prefix = static_prefix(step["args"][0])
    return os.path.join(out, prefix) if prefix and prefix != "." else out
