#!/usr/bin/python3
"""Test only: the shell command that runs a unit's ExecStart= as systemd
would, from an image tree: its Environment= and WorkingDirectory= (unit file
and drop-ins, in systemd's order), then its ExecStart= argv, quoted.

    unit_cmd.py TREE UNIT  ->  cd DIR && exec env -i VAR=… ARGV…

So the tests start the API server with the unit's own command line, not one
they wrote. Handles what our units use: one ExecStart=, Environment= with
one assignment each, quoting as in a shell.
"""
import pathlib
import shlex
import sys

UNIT_DIRS = ["etc/systemd/system", "usr/lib/systemd/system", "lib/systemd/system"]


def unit_files(tree: pathlib.Path, unit: str) -> list[pathlib.Path]:
    main = next((tree / d / unit for d in UNIT_DIRS if (tree / d / unit).is_file()), None)
    if main is None:
        raise SystemExit(f"unit_cmd: {unit}: not in {tree} ({', '.join(UNIT_DIRS)})")
    dropins = {}
    for d in reversed(UNIT_DIRS):
        for conf in sorted((tree / d / f"{unit}.d").glob("*.conf")):
            dropins[conf.name] = conf
    return [main] + [dropins[k] for k in sorted(dropins)]


def service_settings(files: list[pathlib.Path]) -> tuple[dict, str, list[str]]:
    env, workdir, exec_start = {}, "/", None
    for f in files:
        section = None
        for raw in f.read_text().splitlines():
            line = raw.strip()
            if line.startswith("["):
                section = line
            if section != "[Service]" or "=" not in line or line.startswith("#"):
                continue
            key, value = line.split("=", 1)
            if key == "Environment":
                for assignment in shlex.split(value):
                    name, val = assignment.split("=", 1)
                    env[name] = val
            elif key == "WorkingDirectory":
                workdir = value
            elif key == "ExecStart":
                exec_start = shlex.split(value) if value else None
    if not exec_start:
        raise SystemExit(f"unit_cmd: {files[0]}: no ExecStart=")
    return env, workdir, exec_start


def main() -> int:
    tree, unit = pathlib.Path(sys.argv[1]), sys.argv[2]
    env, workdir, argv = service_settings(unit_files(tree, unit))
    env = {"HOME": "/home/user", "PATH": "/usr/local/bin:/usr/bin:/bin", **env}
    assigns = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    print(f"cd {shlex.quote(workdir)} && exec env -i {assigns} {shlex.join(argv)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
