"""Test only, run inside test_ci_kernels.py's namespace once the stack is up:
one context per LANGUAGE (POST :49999/contexts, as the SDKs' createCodeContext),
then every listening TCP socket of the namespace (/proc/net/tcp, tcp6) with
the process holding it. Prints KERNEL-LISTENERS <json>.

    kernel_listeners.py LANGUAGE[,LANGUAGE…]"""
import json
import os
import socket
import struct
import sys
import urllib.request

LISTEN = "0A"


def create_context(language: str) -> dict:
    req = urllib.request.Request("http://127.0.0.1:49999/contexts", method="POST",
                                 data=json.dumps({"language": language}).encode(),
                                 headers={"Content-Type": "application/json"})
    # A JVM or R start under QEMU/TCG is slow; this bounds a hang.
    with urllib.request.urlopen(req, timeout=240) as resp:
        return json.load(resp)


def address(hex_addr: str, family: int) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc/net/tcp* prints each 32-bit word in host (little-endian) order.
    words = b"".join(struct.pack("<I", w) for w in struct.unpack(f">{len(raw) // 4}I", raw))
    return socket.inet_ntop(family, words)


def listeners() -> dict:
    """{inode: "addr:port"} of every listening TCP socket."""
    found = {}
    for name, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        with open(f"/proc/net/{name}") as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == LISTEN:
                    host, port = local.split(":")
                    found[inode] = f"{address(host, family)}:{int(port, 16)}"
    return found


def owners() -> dict:
    """{socket inode: (pid, ppid, cmdline)} over every process."""
    own = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
            ppid = int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    own[target[8:-1]] = (int(pid), ppid, cmd)
        except OSError:
            continue  # gone meanwhile
    return own


def main() -> int:
    contexts = {lang: create_context(lang).get("language") for lang in sys.argv[1].split(",") if lang}
    own = owners()
    sockets = [{"address": addr, "pid": own.get(inode, (None,))[0], "ppid": own.get(inode, (None, None))[1],
                "cmdline": own.get(inode, (None, None, ""))[2][:300]} for inode, addr in listeners().items()]
    print("KERNEL-LISTENERS " + json.dumps({"contexts": contexts, "sockets": sockets}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
