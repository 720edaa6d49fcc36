"""The VMM's ACPI power button, pressed over QEMU's QMP (test only, never
shipped): what a pool does to stop a sandbox cleanly (QEMU's
system_powerdown, cloud-hypervisor's power-button). The guest's logind turns
the press into a poweroff; QEMU then reports SHUTDOWN with reason
"guest-shutdown" and exits."""
from __future__ import annotations

import json
import socket
import subprocess
import time


def _send(sock: socket.socket, command: str) -> None:
    sock.sendall(json.dumps({"execute": command}).encode() + b"\n")


def press(qmp_path: str, qemu: subprocess.Popen, timeout: float) -> dict:
    """Press the power button; wait up to TIMEOUT s for the guest to power
    off. Returns {"reason": QEMU's SHUTDOWN reason or "", "seconds": from the
    press to QEMU's exit, "exited": bool, "error": why it could not press}."""
    out: dict = {"reason": "", "exited": False, "seconds": None}
    buf = b""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(qmp_path)
            _send(sock, "qmp_capabilities")
            _send(sock, "system_powerdown")
            t0 = time.monotonic()
            deadline = t0 + timeout
            while time.monotonic() < deadline and not out["reason"]:
                sock.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    chunk = sock.recv(65536)
                except socket.timeout:
                    break
                if not chunk:  # QEMU closed the socket: it is exiting
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line or b"{}")
                    if "error" in msg:
                        out["error"] = f"QMP: {msg['error']}"
                    if msg.get("event") == "SHUTDOWN":
                        out["reason"] = msg.get("data", {}).get("reason", "")
            try:
                qemu.wait(timeout=max(1.0, deadline - time.monotonic()))
                out["exited"] = True
            except subprocess.TimeoutExpired:
                pass
            out["seconds"] = round(time.monotonic() - t0, 1)
    except OSError as e:
        out["error"] = f"QMP socket {qmp_path}: {e}"
    return out
