#!/usr/bin/python3
"""Text from outside the build (a base image's os-release, a docker archive's
tags, an OCI layout's refs, a tool's stderr, a template's values) made safe
for the operator's terminal and the build log, by the rule hostlink/text.c
applies to a guest's bytes: valid UTF-8 other than a control character
(C0, DEL, C1) stays as it is; every other byte becomes `\\xNN`. So no escape
sequence, bell or carriage return of theirs reaches a terminal, and a
newline of theirs cannot start a line that looks like the build's own.

    python3 -m sandbox.termsafe TEXT...      the TEXTs, escaped, joined by blanks, on one line
    python3 -m sandbox.termsafe              stdin to stdout, line by line (tabs kept)

Python code imports escape() from here; shell scripts run this module
(PYTHONPATH at the checkout's top).
"""
import sys


def _hex(data: bytes) -> str:
    return "".join(f"\\x{b:02x}" for b in data)


def escape(text: str | bytes, keep_tabs: bool = False) -> str:
    """TEXT (bytes, or a str that may carry undecodable bytes as surrogates)
    with every byte that is not printable UTF-8 written as \\xNN."""
    data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogateescape")
    out = []
    for ch in data.decode("utf-8", "surrogateescape"):
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:  # a byte that is not UTF-8
            out.append(f"\\x{cp - 0xDC00:02x}")
        elif (cp < 0x20 and not (keep_tabs and ch == "\t")) or 0x7F <= cp <= 0x9F:
            out.append(_hex(ch.encode()))
        else:
            out.append(ch)
    return "".join(out)


def main(argv: list[str]) -> int:
    out = sys.stdout.buffer  # UTF-8 whatever the locale says
    if argv:
        out.write(escape(" ".join(argv)).encode() + b"\n")
        return 0
    for line in sys.stdin.buffer:
        out.write(escape(line.rstrip(b"\n"), keep_tabs=True).encode() + b"\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
