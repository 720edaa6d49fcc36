"""What the dynamic loader reads besides DT_NEEDED, for the guard record
(sandbox/guard_record.py), parsed from bytes of a hostile image with every
offset and length checked: a malformed input raises LoaderError (or yields
nothing), never an exception of another kind, and no loop runs longer than
its input allows.

- parse_cache(): glibc's ld.so.cache ("glibc-ld.so.cache1.1", alone or after
  the old "ld.so-1.7.0" table, as glibc's dl-cache.c reads it): every entry
  as (name, path, flags, hwcap, hwcaps subdirectory), refused unless the
  entries are in the order the loader's binary search needs (descending by
  _dl_cache_libcmp), so what a linear scan finds is what the loader finds.
- dlopen_sonames(): the sonames an ELF file says it may dlopen(): its
  `.note.dlopen` notes (owner "FDO", type 0x407c0c0a, a JSON array of
  {"soname": [...], "feature", "priority", ...}), as systemd writes them.
- nss_modules(): the libnss_X.so.2 that glibc loads for the services
  etc/nsswitch.conf names.
"""
import json
import re
import struct

CACHE_MAX = 64 << 20
OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
NEW_HEADER = 48          # magic+version 20, nlibs, len_strings, flags + 3 pad, extension_offset, 3 unused
NEW_ENTRY = 24           # flags, key, value, osversion, hwcap (u64)
OLD_HEADER = 16          # magic 11, pad 1, nlibs
OLD_ENTRY = 12           # flags, key, value
EXTENSION_MAGIC = 0xEAA42174
EXTENSION_HWCAPS = 1
HWCAP_EXTENSION = 1 << 62
STRING_MAX = 4096
NOTE_DLOPEN = 0x407C0C0A
SHT_NOTE = 7
NOTES_MAX = 1 << 20


class LoaderError(ValueError):
    pass


def libcmp(a: bytes, b: bytes) -> int:
    """glibc's _dl_cache_libcmp: bytes compared, runs of digits as numbers."""
    i = j = 0
    while i < len(a):
        ca = a[i]
        if 48 <= ca <= 57:
            if j < len(b) and 48 <= b[j] <= 57:
                vi, vj = i, j
                while i < len(a) and 48 <= a[i] <= 57:
                    i += 1
                while j < len(b) and 48 <= b[j] <= 57:
                    j += 1
                x, y = int(a[vi:i]), int(b[vj:j])
                if x != y:
                    return x - y
                continue
            return 1
        cb = b[j] if j < len(b) else 0
        if 48 <= cb <= 57:
            return -1
        if ca != cb:
            return ca - cb
        i += 1
        j += 1
    return 0 - (b[j] if j < len(b) else 0)


def _string(data: bytes, base: int, off: int, what: str) -> bytes:
    start = base + off
    if off < 0 or start >= len(data):
        raise LoaderError(f"{what}: string offset {off} is outside the file")
    end = data.find(b"\0", start, min(len(data), start + STRING_MAX))
    if end < 0:
        raise LoaderError(f"{what}: string at offset {off} has no end within {STRING_MAX} bytes")
    return data[start:end]


def _hwcaps(data: bytes, base: int, ext: int) -> list:
    """The glibc-hwcaps subdirectory names of the cache's extension (index -> name)."""
    if ext == 0:
        return []
    at = base + ext
    if ext % 4 or at + 8 > len(data):
        raise LoaderError(f"extension offset {ext} is outside the file")
    magic, count = struct.unpack_from("<II", data, at)
    if magic != EXTENSION_MAGIC:
        return []   # the loader ignores an extension without its magic
    if count > (len(data) - at - 8) // 16:
        raise LoaderError(f"extension claims {count} sections, more than the file holds")
    names = []
    for k in range(count):
        tag, _flags, off, size = struct.unpack_from("<IIII", data, at + 8 + 16 * k)
        if tag != EXTENSION_HWCAPS:
            continue
        if off % 4 or size % 4 or base + off + size > len(data):
            raise LoaderError("the glibc-hwcaps section is outside the file")
        for n in range(size // 4):
            (s,) = struct.unpack_from("<I", data, base + off + 4 * n)
            names.append(_string(data, base, s, "glibc-hwcaps section").decode("utf-8", "replace"))
    return names


def parse_cache(data: bytes) -> list:
    """[(name, path, flags, hwcap, hwcaps subdirectory or None)], in the
    file's order. Raises LoaderError for anything the check cannot vouch for."""
    if len(data) > CACHE_MAX:
        raise LoaderError(f"larger than {CACHE_MAX} bytes")
    base = 0
    if data.startswith(OLD_MAGIC):
        if len(data) < OLD_HEADER:
            raise LoaderError("truncated old-format header")
        (old_n,) = struct.unpack_from("<I", data, 12)
        if old_n > (len(data) - OLD_HEADER) // OLD_ENTRY:
            raise LoaderError(f"old format claims {old_n} entries, more than the file holds")
        base = (OLD_HEADER + old_n * OLD_ENTRY + 7) & ~7
        if not data.startswith(NEW_MAGIC, base):
            # The loader would use the old table, which this check does not read.
            raise LoaderError("old format only (no glibc-ld.so.cache1.1 part)")
    elif not data.startswith(NEW_MAGIC):
        raise LoaderError("not a glibc-ld.so.cache1.1 file")
    if base + NEW_HEADER > len(data):
        raise LoaderError("truncated header")
    nlibs, _len_strings, endian = struct.unpack_from("<IIB", data, base + 20)
    (ext,) = struct.unpack_from("<I", data, base + 32)
    if endian not in (0, 2):   # unset (older ldconfig) or little-endian; big-endian would not be read here
        raise LoaderError(f"byte order flag {endian} is not this machine's")
    if nlibs > (len(data) - base - NEW_HEADER) // NEW_ENTRY:
        raise LoaderError(f"claims {nlibs} entries, more than the file holds")
    hwcaps = _hwcaps(data, base, ext)
    out = []
    prev = None
    for i in range(nlibs):
        flags, key, value, _osv, hwcap = struct.unpack_from("<iIIIQ", data, base + NEW_HEADER + NEW_ENTRY * i)
        name = _string(data, base, key, f"entry {i}'s name")
        path = _string(data, base, value, f"entry {i}'s path")
        if prev is not None and libcmp(prev, name) < 0:
            raise LoaderError(f"entry {i} ({name.decode('utf-8', 'replace')}) is out of the order the loader "
                              "searches in")
        prev = name
        sub = None
        if hwcap & HWCAP_EXTENSION:
            idx = hwcap & 0xFFFFFFFF
            sub = hwcaps[idx] if idx < len(hwcaps) else f"#{idx} (no such glibc-hwcaps entry)"
        out.append((name.decode("utf-8", "surrogateescape"), path.decode("utf-8", "surrogateescape"),
                    flags, hwcap, sub))
    return out


def cache_view(data: bytes, names) -> dict:
    """{name: "PATH flags=F hwcap=H[ (SUBDIR)]; ..." or "none"} for NAMES: what
    the loader may take from the cache for each."""
    want = set(names)
    found = {n: [] for n in want}
    for name, path, flags, hwcap, sub in parse_cache(data):
        if name in want:
            found[name].append(f"{path} flags={flags:#x} hwcap={hwcap:#x}" + (f" ({sub})" if sub else ""))
    return {n: "; ".join(v) or "none" for n, v in found.items()}


def _notes(blob: bytes, align: int):
    """(name, type, desc) of each note in BLOB."""
    at = 0
    while at + 12 <= len(blob):
        namesz, descsz, ntype = struct.unpack_from("<III", blob, at)
        name_at = at + 12
        desc_at = name_at + ((namesz + align - 1) & ~(align - 1))
        end = desc_at + ((descsz + align - 1) & ~(align - 1))
        if desc_at + descsz > len(blob) or end <= at:
            return
        yield blob[name_at:name_at + namesz], ntype, blob[desc_at:desc_at + descsz]
        at = end


def dlopen_sonames(pread) -> list:
    """The sonames in an ELF file's .note.dlopen notes. PREAD(n, offset)
    reads the file; a file that is not a little-endian 64-bit ELF, or whose
    notes do not parse, gives what could be read (maybe nothing)."""
    head = pread(64, 0)
    if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
        return []
    (shoff,) = struct.unpack_from("<Q", head, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
    if shentsize < 64 or shnum == 0 or shnum > 4096:
        return []
    table = pread(shentsize * shnum, shoff)
    if len(table) < shentsize * shnum:
        return []
    out = []
    for k in range(shnum):
        _name, stype, _f, _a, off, size, _l, _i, align, _e = struct.unpack_from("<IIQQQQIIQQ", table, k * shentsize)
        if stype != SHT_NOTE or size == 0 or size > NOTES_MAX:
            continue
        for owner, ntype, desc in _notes(pread(size, off), 8 if align == 8 else 4):
            if owner.rstrip(b"\0") != b"FDO" or ntype != NOTE_DLOPEN:
                continue
            try:
                items = json.loads(desc.rstrip(b"\0").decode("utf-8"))
            except (ValueError, RecursionError):
                continue
            for item in items if isinstance(items, list) else []:
                sonames = item.get("soname") if isinstance(item, dict) else None
                for s in sonames if isinstance(sonames, list) else []:
                    if isinstance(s, str) and re.fullmatch(r"[A-Za-z0-9._+-]{1,255}", s):
                        out.append(s)
    return sorted(set(out))


def nss_modules(text: str) -> list:
    """libnss_X.so.2 for every service X that nsswitch.conf names
    (`db: service [STATUS=action] service ...`)."""
    out = set()
    for line in text.splitlines():
        line = line.split("#", 1)[0]
        if ":" not in line:
            continue
        rest = re.sub(r"\[[^\]]*\]", " ", line.split(":", 1)[1])
        for svc in rest.split():
            if re.fullmatch(r"[A-Za-z0-9_-]{1,64}", svc):
                out.add(f"libnss_{svc}.so.2")
    return sorted(out)
