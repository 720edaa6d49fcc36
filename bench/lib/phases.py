#!/usr/bin/python3
"""Bench helper: a build's time split by phase, from a log whose every line
starts with its time stamp (bench/lib/stamped-build.sh).

    phases.py LOG LABEL REGEX [LABEL REGEX]... LAST_LABEL

The first LABEL runs from the log's first line to the first line matching
its REGEX, each next one from there to the next match after it, LAST_LABEL
to the log's last line. Prints `LABEL N.N s, ...` on one line."""
import re
import sys

log, spec = sys.argv[1], sys.argv[2:]
lines = []
for line in open(log, encoding="utf-8", errors="replace"):
    stamp, _, text = line.rstrip("\n").partition(" ")
    lines.append((float(stamp), text))
t, out, i = lines[0][0], [], 0
for label, pattern in zip(spec[0:-1:2], spec[1::2]):
    while not re.search(pattern, lines[i][1]):
        i += 1
        if i == len(lines):
            sys.exit(f"phases: {log}: no line matches {pattern!r} (phase {label})")
    out.append(f"{label} {lines[i][0] - t:.1f} s")
    t = lines[i][0]
out.append(f"{spec[-1]} {lines[-1][0] - t:.1f} s")
print(", ".join(out))
