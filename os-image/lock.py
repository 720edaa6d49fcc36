#!/usr/bin/python3
"""Read one stanza of a recipes/*.lock file (format: see docs in recipes/ and
contracts: `[name]` then `key = value` lines, `#` comments).

  lock.py FILE NAME FIELD     print one field (exit 1 if missing)
  lock.py FILE NAME           print the stanza as JSON
"""
import json
import sys


def read_lock(path):
    stanzas, cur = {}, None
    with open(path, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("[") and line.endswith("]"):
                cur = stanzas.setdefault(line[1:-1].strip(), {})
            elif "=" in line and cur is not None:
                k, _, v = line.partition("=")
                cur[k.strip()] = v.strip()
            else:
                raise ValueError(f"{path}:{n}: not a lock line: {raw.rstrip()}")
    return stanzas


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        st = read_lock(argv[0]).get(argv[1])
    except (OSError, ValueError) as e:
        print(f"lock.py: {e}", file=sys.stderr)
        return 1
    if st is None:
        print(f"lock.py: {argv[0]}: no [{argv[1]}] stanza", file=sys.stderr)
        return 1
    if len(argv) == 2:
        print(json.dumps(dict(st, name=argv[1]), sort_keys=True))
        return 0
    if argv[2] not in st:
        print(f"lock.py: {argv[0]}: [{argv[1]}] has no {argv[2]}", file=sys.stderr)
        return 1
    print(st[argv[2]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
