"""The host ids a build sandbox runs as: one slot of 65536 subordinate ids.

Root in the sandbox must not be the host's root (the kernel lets uid 0 write
/proc/sys and more with no capability check), so sandbox/confine.py maps the
sandbox's ids 0..65535 onto a range of the host's that no one else uses: the
subordinate ids of the user `e2b-build` in /etc/subuid and /etc/subgid
(`make deps` makes them). The range is cut into slots of 65536; each
sandbox takes a free one, held by a lock for as long as it runs, so two
builds at once never share an id (nor signals, nor keyrings, nor files).
"""
import fcntl
import os

SUBID_USER = "e2b-build"
SLOT = 65536
LOCK_DIR = "/run/e2b-images/sandbox-slots"


class IdError(Exception):
    pass


def ranges(path: str, user: str) -> list[tuple[int, int]]:
    """The ranges (start, count) /etc/subuid or /etc/subgid gives USER."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return out
    for ln in lines:
        parts = ln.strip().split(":")
        if len(parts) != 3 or parts[0] != user:
            continue
        try:
            start, count = int(parts[1]), int(parts[2])
        except ValueError:
            continue
        if start > 0 and count > 0:
            out.append((start, count))
    return out


def slots(uid_path: str = "/etc/subuid", gid_path: str = "/etc/subgid", user: str = SUBID_USER) -> list[tuple[int, int]]:
    """Every (host uid, host gid) a slot starts at, in order."""
    uids = [s + i * SLOT for s, n in ranges(uid_path, user) for i in range(n // SLOT)]
    gids = [s + i * SLOT for s, n in ranges(gid_path, user) for i in range(n // SLOT)]
    if not uids or not gids:
        missing = " and ".join(p for p, r in ((uid_path, uids), (gid_path, gids)) if not r)
        raise IdError(f"{missing} give the user {user} no range of {SLOT} ids: the build sandbox maps its root "
                      f"there, never onto the host's (run `make deps`, which adds one, or add one yourself: "
                      f"usermod --add-subuids START-END --add-subgids START-END {user})")
    return list(zip(uids, gids))


class Slot:
    """A free slot, held (flock) until release(): .uid and .gid, the host ids of root inside."""

    def __init__(self, lock_dir: str = LOCK_DIR, **kw):
        os.makedirs(lock_dir, mode=0o700, exist_ok=True)
        for i, (uid, gid) in enumerate(slots(**kw)):
            fd = os.open(os.path.join(lock_dir, f"slot-{i}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.fd, self.uid, self.gid = fd, uid, gid
            return
        raise IdError(f"every slot of {SUBID_USER}'s subordinate ids is in use by another build (locks in "
                      f"{lock_dir}): wait for one to end, or give {SUBID_USER} a larger range")

    def release(self):
        os.close(self.fd)
