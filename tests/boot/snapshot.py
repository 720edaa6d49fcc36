"""Snapshots and clones of a booted guest under QEMU, for the clone test
(tests/boot/test_clone_snapshot.py).

One warm boot of the e2b-rt image per configuration, with a small test
payload instead of the boot probe (guest/clone-sampler.sh on the second
serial port); the host takes the snapshot with the monitor's `savevm` into the
qcow2 overlay over the image, and each clone starts from a copy of that
overlay with the same command line plus `-loadvm`. The control line is a
socket chardev with `wait=on`: QEMU runs the restored guest only once the
host is connected, and the host's first line goes out at once, so the
sampler (blocked in its read when the snapshot was taken) is the first thing
the clone runs.

The machines have no host-to-guest vsock, so the host's e2b-hostlink reaches
the guest's vsock ports through the hybrid-vsock stand-in
(tests/hostlink/fake_hybrid_vsock.py), run in the VM's network namespace,
whose ports map to guest TCP ports that socat in the guest connects to the
real vsock ports over vsock_loopback (CID 1). Only the VMM's vsock hop is
stood in for.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import time

import vm

HERE = pathlib.Path(__file__).resolve().parent
FAKE_VMM = HERE.parent / "hostlink" / "fake_hybrid_vsock.py"
CLONE_PORT, ENVD_PORT = 18110, 18111   # guest TCP ports socat connects to vsock 10053 and 49983
VSOCK_CLONE, VSOCK_ENVD = 10053, 49983
TAP_MAC = "52:54:00:e2:b0:fe"  # the host end of the tap: the same in every clone, so its ARP entry holds
SNAPSHOT = "warm"
VARIANT = vm.Variant("e2b-rt", "clone", 1, 512)
# No RDRAND/RDSEED: the guest's CRNG then has nothing but its own state to
# draw from between reseeds (the hazard the test shows).
CPU = "max,-rdrand,-rdseed"


def _payload(dest: pathlib.Path, v, kin, ci_tries) -> None:
    units = dest / "systemd" / "system"
    (units / "multi-user.target.wants").mkdir(parents=True)
    shutil.copy(vm.GUEST / "e2b-test-clone-sampler.service", units)
    (units / "multi-user.target.wants" / "e2b-test-clone-sampler.service").symlink_to(
        "../e2b-test-clone-sampler.service")
    t = dest / "e2b-test"
    t.mkdir()
    shutil.copy(vm.GUEST / "clone-sampler.sh", t)
    (t / "env").write_text(f"E2B_TEST_IP={vm.GUEST_ADDR}\nE2B_TEST_CLONE_PORT={CLONE_PORT}\n"
                           f"E2B_TEST_ENVD_PORT={ENVD_PORT}\n")


class Machine:
    """One QEMU run (the warm boot or a clone) in a network namespace of its
    own, with its control line, monitor and VMM-socket stand-in."""

    def __init__(self, work: pathlib.Path, name: str, argv: list[str]):
        self.work, self.name = work, name
        self.ctl_path, self.mon_path = work / f"{name}-ctl.sock", work / f"{name}-mon.sock"
        self.uds = work / f"{name}-vsock.sock"
        self.console = work / f"{name}-console.log"
        self.argv = argv + ["-serial", f"file:{self.console}",
                            "-chardev", f"socket,id=ctl,path={self.ctl_path},server=on,wait=on",
                            "-serial", "chardev:ctl", "-monitor", f"unix:{self.mon_path},server=on,wait=off"]
        self.stack = contextlib.ExitStack()
        self.qemu = self.vmm = self.ctl = None
        self.buf = b""

    def __enter__(self):
        try:
            self.stack.enter_context(vm.qemu_lock())
            ns = self.stack.enter_context(vm.Netns(self.name))
            ns.ip("link", "set", ns.tap, "address", TAP_MAC)
            self.qemu = subprocess.Popen(ns.exec_argv(self.argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                         preexec_fn=vm._die_with_parent)
            self.stack.callback(vm._stop, self.qemu)
            self.vmm = subprocess.Popen(ns.exec_argv(
                ["/usr/bin/python3", str(FAKE_VMM), "--uds", str(self.uds),
                 "--map", f"{VSOCK_CLONE}={vm.GUEST_ADDR}:{CLONE_PORT}",
                 "--map", f"{VSOCK_ENVD}={vm.GUEST_ADDR}:{ENVD_PORT}"]),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=vm._die_with_parent)
            self.stack.callback(vm._stop, self.vmm)
            assert self.vmm.stdout.readline().strip() == "ready", "the VMM socket stand-in did not start"
            self.ctl = self._connect(self.ctl_path)
        except BaseException:
            self.stack.close()
            raise
        return self

    def _connect(self, path: pathlib.Path, timeout: float = 60) -> socket.socket:
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                return s
            except OSError:
                s.close()
                if self.qemu.poll() is not None or time.monotonic() > deadline:
                    out = self.qemu.stdout.read().decode(errors="replace") if self.qemu.poll() is not None else ""
                    raise RuntimeError(f"{self.name}: QEMU's socket {path} never came up: {out[-2000:]}")
                time.sleep(0.05)

    def send(self, cmd: str) -> None:
        self.ctl.sendall(cmd.encode() + b"\n")

    def line(self, timeout: float) -> dict:
        """The sampler's next "E2B-CLONE-TEST k=v ..." line, as a dict."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name}: no answer on the control line within {timeout:.0f} s; "
                                   f"console tail: {self.console_tail()}")
            self.ctl.settimeout(left)
            chunk = self.ctl.recv(4096)
            if not chunk:
                raise RuntimeError(f"{self.name}: the control line closed; console tail: {self.console_tail()}")
            self.buf += chunk
        raw, _, self.buf = self.buf.partition(b"\n")
        text = raw.decode(errors="replace").strip()
        if not text.startswith("E2B-CLONE-TEST "):
            return self.line(max(deadline - time.monotonic(), 1))
        fields = {}
        for item in text.split(" ")[1:]:
            k, _, v = item.partition("=")
            fields[k] = v
        return fields

    def ask(self, cmd: str, timeout: float = 60) -> dict:
        self.send(cmd)
        return self.line(timeout)

    def monitor(self, cmd: str, timeout: float = 600) -> str:
        """One HMP command; its output (a savevm prints nothing when it works)."""
        with self._connect(self.mon_path) as m:
            m.settimeout(timeout)
            out = b""
            while not out.endswith(b"(qemu) "):
                out += m.recv(4096)
            m.sendall(cmd.encode() + b"\n")
            out = b""
            while not out.endswith(b"(qemu) "):
                chunk = m.recv(4096)
                if not chunk:
                    break
                out += chunk
        text = out.decode(errors="replace").replace("\r", "")
        return text.split("\n", 1)[1].rsplit("(qemu)", 1)[0].strip() if "\n" in text else ""

    def hostlink(self, *args, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(vm.HOSTLINK), "--uds", str(self.uds), *map(str, args)],
                              capture_output=True, text=True, timeout=timeout)

    def console_tail(self) -> str:
        return self.console.read_text(errors="replace")[-1500:] if self.console.exists() else ""

    def __exit__(self, *exc):
        self.stack.close()


class Template:
    """The warm boot's kernel, initramfs and snapshot overlay, and the QEMU
    command line every clone shares with it."""

    def __init__(self, rootfs: pathlib.Path, work: pathlib.Path, vmgenid: bool):
        self.work, self.vmgenid = work, vmgenid
        kin = vm.kernel_inputs()
        self.initrd = vm.build_initramfs(work, VARIANT, kin, 0, payload=_payload)
        self.overlay = work / "warm.qcow2"
        vm.run("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", rootfs.resolve(), self.overlay)
        self.kernel = kin["kernel"]

    def argv(self, disk: pathlib.Path, document: pathlib.Path) -> list[str]:
        cmdline = " ".join(["console=ttyS0", "root=/dev/vda", "rootfstype=ext4", "rw", "panic=-1", "loglevel=4",
                            "net.ifnames=0", f"ip={vm.GUEST_ADDR}::{vm.HOST_ADDR}:255.255.255.0::eth0:off",
                            "systemd.show_status=error"])
        return ["qemu-system-x86_64", "-accel", "tcg", "-M", "q35", "-cpu", CPU, "-smp", "1",
                "-m", str(VARIANT.mem), "-nodefaults", "-display", "none", "-no-reboot",
                "-kernel", str(self.kernel), "-initrd", str(self.initrd), "-append", cmdline,
                "-drive", f"file={disk},if=virtio,format=qcow2,cache=unsafe",
                "-fw_cfg", f"name=opt/e2b/mmds,file={document}",
                "-netdev", f"tap,id=n0,ifname=e2btap0,script=no,downscript=no",
                "-device", "virtio-net-pci,netdev=n0,mac=52:54:00:e2:b0:01"] + \
            (["-device", "vmgenid,guid=auto"] if self.vmgenid else [])

    def clone_disk(self, name: str) -> pathlib.Path:
        disk = self.work / f"{name}.qcow2"
        shutil.copyfile(self.overlay, disk)
        return disk


def host_ms() -> int:
    return time.time_ns() // 1_000_000


def remove(path: pathlib.Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
