#!/usr/bin/python3
"""QEMU boot harness for out/<flavor>/rootfs.ext4 (test only, never shipped).

One boot per call:
- kernel: Debian's linux-image-amd64 (the host's apt sources), downloaded with
  `apt-get download` into out/cache/boot/ -- a test input, not part of the image;
- initramfs: busybox-static + the modules a Debian kernel keeps out of its
  image (virtio, ext4, fw_cfg, nf_tables and every nft expression, so the
  guard never needs module autoloading from a root that has no modules), and
  the test payload (units + probe) that /init copies into the new root's /run;
- disk: a qcow2 overlay over the rootfs, so the built image is never written;
- MMDS document: QEMU fw_cfg opt/e2b/mmds, put in place by the image's own
  units/mmds-fwcfg.service;
- network: a tap in a network namespace created for this boot; the guest's
  eth0 gets its address from `ip=` on the kernel command line (the pool path);
- report: the probe's "E2B-PROBE key=value" lines on the second serial port.

The VM, the namespace and the work directory are removed on every exit path.
`python3 tests/boot/vm.py --flavor e2b-rt` boots once and prints the checks
(tests/boot/checks.py); `make boot-test` runs that.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import ctypes
import json
import os
import pathlib
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import power
import sdk_host
from variants import (ALL_VARIANTS, BROKEN, DROPINS, VARIANTS,  # noqa: F401 (vm.X for the tests)
                      WORKFLOW_VARIANTS, Variant, variant)

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
GUEST = HERE / "guest"
CACHE = pathlib.Path(os.environ.get("E2B_BOOT_CACHE", ROOT / "out" / "cache" / "boot"))


HOST_ADDR = "192.168.77.1"
GUEST_ADDR = "192.168.77.2"
PREFIX = 24
METADATA_ADDR = "169.254.169.254"
HOSTLINK = pathlib.Path(os.environ.get("BUILD", ROOT / "build")) / "e2b-hostlink"  # `make tools`
OPEN_PORT = 18080            # the probe's unguarded listener (e2b-test-httpd.service)
GUARDED_PORTS = [49983, 49999, 8888]
# What the guard must drop from outside: the guarded ports on the NIC's
# address, and the MMDS alias.
GUARDED = [f"{GUEST_ADDR}:{p}" for p in GUARDED_PORTS] + [f"{METADATA_ADDR}:80"]
CI_SECONDS = 450  # wall-clock cap on the probe's e2b-ci wait (TCG; 1 vCPU: 290-380 s seen)


MODULES = [
    "virtio_pci", "virtio_blk", "virtio_net", "ext4", "qemu_fw_cfg",
    "nf_tables", "nfnetlink",
] + [
    # vsock with the loopback transport: the relays are exercised from inside
    # the guest at CID 1 (the host has no host-to-guest vsock transport).
    "vsock", "vsock_loopback",
]
# A power button for the variants that press it (Variant.power_button):
# QEMU q35's ACPI button and the event device logind watches.
POWER_BUTTON_MODULES = ["button", "evdev"]
# Every nft expression module too: the guard's rules must load without
# autoloading (the image ships no kernel modules).
NFT_MODULE_GLOBS = ["kernel/net/netfilter/nft_*.ko*", "kernel/net/ipv4/netfilter/nft_*.ko*",
                    "kernel/net/ipv6/netfilter/nft_*.ko*", "kernel/net/netfilter/nf_conntrack.ko*"]

PR_SET_PDEATHSIG = 1


def log(msg: str) -> None:
    print(f"boot: {msg}", file=sys.stderr, flush=True)


def run(*args, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("check", True)
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 300)
    try:
        return subprocess.run([str(a) for a in args], **kw)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"{' '.join(map(str, args))}: exit {e.returncode}: {e.stderr.strip()}") from e


# ---------------------------------------------------------------- kernel ---

def _apt_download(pkg: str, dest: pathlib.Path) -> pathlib.Path:
    """The .deb of `pkg` at the candidate version, cached in dest."""
    ver = run("apt-cache", "policy", pkg).stdout
    m = re.search(r"Candidate:\s*(\S+)", ver)
    if not m or m.group(1) == "(none)":
        raise RuntimeError(f"{pkg}: no candidate in the host's apt sources (run apt-get update)")
    version = m.group(1).split(":", 1)[-1]
    existing = sorted(dest.glob(f"{pkg}_*{version}_amd64.deb"))
    if existing:
        return existing[0]
    dest.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(dir=dest, prefix=".dl-"))
    try:
        os.chmod(tmp, 0o777)  # apt's _apt user writes the file
        run("apt-get", "download", "-q", f"{pkg}={m.group(1)}", cwd=tmp, timeout=600)
        (deb,) = tmp.glob("*.deb")
        final = dest / deb.name.replace("%3a", "_")
        deb.rename(final)
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def kernel_inputs(cache: pathlib.Path = CACHE) -> dict:
    """Kernel image, module tree and busybox, unpacked once into the cache."""
    meta = run("apt-cache", "depends", "linux-image-amd64").stdout
    m = re.search(r"Depends:\s*(linux-image-\S+)", meta)
    if not m:
        raise RuntimeError("linux-image-amd64: no versioned kernel package in the host's apt sources")
    kpkg = m.group(1)
    kver = kpkg[len("linux-image-"):]
    kdir = cache / kpkg
    if not (kdir / "boot" / f"vmlinuz-{kver}").exists():
        deb = _apt_download(kpkg, cache / "debs")
        tmp = cache / f".{kpkg}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        run("dpkg-deb", "-x", deb, tmp)
        run("depmod", "-b", tmp, kver)
        shutil.rmtree(kdir, ignore_errors=True)
        tmp.rename(kdir)
    bdir = cache / "busybox-static"
    if not (bdir / "bin" / "busybox").exists():
        deb = _apt_download("busybox-static", cache / "debs")
        tmp = cache / ".busybox.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        run("dpkg-deb", "-x", deb, tmp)
        shutil.rmtree(bdir, ignore_errors=True)
        tmp.rename(bdir)
    return {"kver": kver, "kernel": kdir / "boot" / f"vmlinuz-{kver}", "root": kdir,
            "busybox": bdir / "bin" / "busybox"}


def module_load_order(kin: dict, extra: list[str] = ()) -> list[pathlib.Path]:
    """Module files with their dependencies first, each once (modprobe -D)."""
    moddir = kin["root"] / "lib" / "modules" / kin["kver"]
    names = list(MODULES) + list(extra)
    for g in NFT_MODULE_GLOBS:
        names += sorted(p.name.split(".ko")[0] for p in moddir.glob(g))
    order: list[pathlib.Path] = []
    for name in names:
        out = run("modprobe", "-d", kin["root"], "-S", kin["kver"], "--show-depends", name,
                  check=False)
        if out.returncode != 0:
            if "builtin" in out.stdout + out.stderr:
                continue
            raise RuntimeError(f"module {name}: {out.stderr.strip()}")
        for line in out.stdout.splitlines():
            parts = line.split()
            if parts[:1] == ["insmod"]:
                p = pathlib.Path(parts[1])
                if p not in order:
                    order.append(p)
    return order


# ------------------------------------------------------------- initramfs ---

# Test units, each with the units that pull it in (".wants" links). The MMDS
# document comes through fw_cfg and the image's own mmds-fwcfg.service.
TEST_UNITS = {
    "e2b-test-httpd.service": ["multi-user.target"],
    "e2b-test-probe.service": ["multi-user.target"],
    "e2b-test-readiness.service": ["envd.service"],
    "e2b-test-listen@.service": [],  # started by the probe
}
PROBE_TOOLS = ["probe.sh", "readiness.sh", "vsock.sh", "sdk-reset.sh", "template.sh"]


def install_units(units: pathlib.Path, v: Variant) -> None:
    for unit, wanted_by in TEST_UNITS.items():
        shutil.copy(GUEST / unit, units / unit)
        for target in wanted_by:
            wants = units / f"{target}.wants"
            wants.mkdir(exist_ok=True)
            (wants / unit).symlink_to(f"../{unit}")
    for dropin_dir, conf in DROPINS.get(v.mode, {}).items():
        (units / dropin_dir).mkdir(exist_ok=True)
        shutil.copy(GUEST / conf, units / dropin_dir / conf)


def build_payload(dest: pathlib.Path, v: Variant, kin: dict, ci_tries: int) -> None:
    """What /init copies into the new root's /run: test units and tools."""
    units = dest / "systemd" / "system"
    units.mkdir(parents=True)
    install_units(units, v)
    t = dest / "e2b-test"
    (t / "www").mkdir(parents=True)
    shutil.copy(kin["busybox"], t / "busybox")
    for tool in PROBE_TOOLS:
        shutil.copy(GUEST / tool, t / tool)
    # The host tool the vsock probe drives over AF_VSOCK (libc only).
    shutil.copy(HOSTLINK, t / "e2b-hostlink")
    (t / "www" / "index.html").write_text("e2b-test-open-port\n")
    (t / "env").write_text(
        f"E2B_TEST_FLAVOR={v.flavor}\nE2B_TEST_MODE={v.mode}\nE2B_TEST_STOP_GUARD={int(v.stop_guard)}\n"
        f"E2B_TEST_TEMPLATE_WARMUP={base64.b64encode(v.template_warmup.encode()).decode()}\n"
        + "".join(f"E2B_TEST_TEMPLATE_{k}={shlex.quote(val)}\n" for k, val in v.template_probe) +
        f"E2B_TEST_SDK={int(v.sdk)}\nE2B_TEST_SDK_FORWARDS=\"{' '.join(f'{l}:{g}' for l, g in sdk_host.FORWARDS.items())}\"\n"
        f"E2B_TEST_SDK_RESET_PORT={sdk_host.RESET_PORT}\n"
        f"E2B_TEST_IFACE=eth0\nE2B_TEST_ADDR={GUEST_ADDR}/{PREFIX}\nE2B_TEST_IP={GUEST_ADDR}\n"
        f"E2B_TEST_GUARDED=\"{' '.join(GUARDED)}\"\n"
        f"E2B_TEST_CI_TRIES={ci_tries}\nE2B_TEST_CI_SECONDS={CI_SECONDS}\n")


def build_initramfs(work: pathlib.Path, v: Variant, kin: dict, ci_tries: int, payload=None) -> pathlib.Path:
    """PAYLOAD(dest, v, kin, ci_tries) lays out what /init copies (default: the boot probe's)."""
    tree = work / "initramfs"
    (tree / "bin").mkdir(parents=True)
    (tree / "lib" / "modules").mkdir(parents=True)
    shutil.copy(kin["busybox"], tree / "bin" / "busybox")
    shutil.copy(GUEST / "init", tree / "init")
    os.chmod(tree / "init", 0o755)
    lines = []
    for i, mod in enumerate(module_load_order(kin, POWER_BUTTON_MODULES if v.power_button else [])):
        name = f"{i:03d}-{mod.name}"
        if mod.name.endswith(".xz"):
            name = name[:-3]
            with open(tree / "lib" / "modules" / name, "wb") as f:
                subprocess.run(["xz", "-dc", str(mod)], stdout=f, check=True)
        elif mod.name.endswith(".zst"):
            name = name[:-4]
            run("zstd", "-qdf", mod, "-o", tree / "lib" / "modules" / name)
        else:
            shutil.copy(mod, tree / "lib" / "modules" / name)
        lines.append(f"/lib/modules/{name}")
    (tree / "modules.order").write_text("\n".join(lines) + "\n")
    (payload or build_payload)(tree / "payload", v, kin, ci_tries)
    out = work / "initramfs.cpio.gz"
    files = sorted(str(p.relative_to(tree)) for p in tree.rglob("*"))
    with open(out, "wb") as f:
        cpio = subprocess.Popen(["cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0"], cwd=tree,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        gz = subprocess.Popen(["gzip", "-1", "-n"], stdin=cpio.stdout, stdout=f)
        cpio.stdout.close()
        cpio.communicate(("\n".join(["."] + files) + "\n").encode())
        if gz.wait() != 0 or cpio.returncode != 0:
            raise RuntimeError("initramfs: cpio|gzip failed")
    return out


# ------------------------------------------------------------------ accel ---

def choose_accel(kin: dict, work: pathlib.Path) -> str:
    """KVM if a bare kernel boots with it within seconds, else TCG.

    Nested KVM on our machines either has no /dev/kvm or hangs (see
    machine-notes), so the kernel must reach its panic (no root) quickly."""
    forced = os.environ.get("E2B_BOOT_ACCEL")
    if forced in ("kvm", "tcg"):
        return forced
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    con = work / "kvm-probe.log"
    try:
        subprocess.run(["qemu-system-x86_64", "-accel", "kvm", "-M", "q35", "-m", "256", "-nodefaults",
                        "-display", "none", "-no-reboot", "-serial", f"file:{con}", "-kernel",
                        str(kin["kernel"]), "-append", "console=ttyS0 panic=-1 root=/dev/e2b-none"],
                       capture_output=True, timeout=15, preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired:
        return "tcg"
    text = con.read_text(errors="replace") if con.exists() else ""
    return "kvm" if "Kernel panic" in text else "tcg"


def _die_with_parent() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setpgrp()


# ---------------------------------------------------------------- network ---

class Netns:
    """A namespace with one tap for the VM, named after our pid; always deleted."""

    def __init__(self, tag: str):
        self.name = f"e2bt-boot-{os.getpid()}-{tag}"[:40]
        self.tap = "e2btap0"

    def __enter__(self):
        run("ip", "netns", "add", self.name)
        try:
            self.ip("link", "set", "lo", "up")
            self.ip("tuntap", "add", "dev", self.tap, "mode", "tap")
            self.ip("addr", "add", f"{HOST_ADDR}/{PREFIX}", "dev", self.tap)
            self.ip("link", "set", self.tap, "up")
            # Send the metadata address to the guest: its lo alias must not
            # answer from outside.
            self.ip("route", "add", f"{METADATA_ADDR}/32", "via", GUEST_ADDR, "dev", self.tap, "onlink")
        except Exception:
            self.close()
            raise
        return self

    def ip(self, *args):
        return run("ip", "-n", self.name, *args)

    def exec_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.name, *argv]

    def close(self):
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)

    def __exit__(self, *exc):
        self.close()


PORT_CHECK = r"""
import json, socket, sys
res = {}
for spec in sys.argv[1:]:
    host, port = spec.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, int(port)))
        s.sendall(b"GET /index.html HTTP/1.0\r\nHost: x\r\n\r\n")
        data = b""
        try:
            while len(data) < 4096:
                c = s.recv(4096)
                if not c:
                    break
                data += c
        except socket.timeout:
            pass
        res[spec] = {"state": "open", "reply": data.decode(errors="replace")[:300]}
    except ConnectionRefusedError:
        res[spec] = {"state": "refused"}
    except (socket.timeout, TimeoutError):
        res[spec] = {"state": "timeout"}
    except OSError as e:
        res[spec] = {"state": "error", "error": str(e)}
    finally:
        s.close()
print(json.dumps(res))
"""


def host_port_checks(ns: Netns) -> dict:
    targets = GUARDED + [f"{GUEST_ADDR}:{OPEN_PORT}"]
    cp = subprocess.run(ns.exec_argv(["/usr/bin/python3", "-c", PORT_CHECK, *targets]),
                        capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise RuntimeError(f"port checks in {ns.name}: {cp.stderr.strip()}")
    return json.loads(cp.stdout)


# ------------------------------------------------------------------- boot ---

PROBE_RE = re.compile(r"^E2B-PROBE (\w+)=(\S*)\r?$", re.M)


def parse_report(text: str) -> dict:
    """The probe's lines -> {key: value}, *_b64 values decoded.

    The host reads the serial log while the guest is still writing it, so
    the last line may be cut short: only lines that end in a newline count.
    A value that still does not decode is left out (the checks that read it
    fail for want of it) and its key is listed under "undecodable", which
    the report_intact check fails on."""
    rep: dict = {}
    bad = []
    complete = text[:text.rfind("\n") + 1]
    for k, v in PROBE_RE.findall(complete):
        if k.endswith("_b64"):
            k = k[:-4]
            try:
                v = base64.b64decode(v, validate=True).decode(errors="replace")
            except ValueError:
                bad.append(k)
                rep.pop(k, None)
                continue
        rep[k] = v
    if bad:
        rep["undecodable"] = " ".join(bad)
    return rep


def make_document(token_hash: str = "") -> dict:
    return {"instanceID": f"isb-boot-{secrets.token_hex(6)}", "envID": "tmpl-boot-test",
            "address": "", "accessTokenHash": token_hash}


def boot(v: Variant, rootfs: pathlib.Path, timeout: float | None = None,
         keep_logs: pathlib.Path | None = None) -> dict:
    """Boots rootfs once as V; returns the probe report, host-side port checks and logs."""
    with _terminate_as_exception(), qemu_lock():
        return _boot(v, rootfs, timeout or v.timeout, keep_logs)


@contextlib.contextmanager
def qemu_lock():
    """With E2B_QEMU_LOCK=FILE, holds an flock on FILE (the boot's time
    budget starts once it has it), so that on a shared machine the boots of
    processes taking the same lock (bench/boot.sh's BENCH_QEMU_LOCK, a
    second checkout's tests) run one at a time. Unset: no lock."""
    path = os.environ.get("E2B_QEMU_LOCK")
    if not path:
        yield
        return
    import fcntl
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


class Terminated(Exception):
    pass


@contextlib.contextmanager
def _terminate_as_exception():
    """SIGTERM/SIGHUP unwind through the finally blocks (VM, netns, files)
    instead of ending the process on the spot."""
    import threading
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, _frame):
        raise Terminated(f"signal {signum}")
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _boot(v: Variant, rootfs: pathlib.Path, timeout: float, keep_logs: pathlib.Path | None) -> dict:
    flavor = v.flavor
    rootfs = rootfs.resolve()
    if not rootfs.exists():
        raise FileNotFoundError(f"{rootfs}: no image; build it with `make flavor={flavor}`")
    deadline = time.monotonic() + timeout
    kin = kernel_inputs()
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"e2b-boot-{flavor}-"))
    qemu = None
    result: dict = {"flavor": flavor, "variant": v.name, "boot": v.id, "mode": v.mode, "power_button": v.power_button,
                    "stop_guard": v.stop_guard, "cpus": v.cpus, "mem_mib": v.mem, "rootfs": str(rootfs)}
    try:
        # x 0.1 s: e2b-ci services under TCG take a while; with upstream's
        # default javascript context beside python's (issue 36), :49999 was
        # healthy 143 s after the probe's start on 2 vCPUs (load 2.5).
        ci_tries = 2400
        initrd = build_initramfs(work, v, kin, ci_tries)
        accel = choose_accel(kin, work)
        result["accel"] = accel
        overlay = work / "disk.qcow2"
        run("qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", rootfs, overlay)
        token, token_hash = sdk_host.new_token() if v.sdk else (None, "")
        doc = make_document(token_hash)
        (work / "mmds.json").write_text(json.dumps(doc))
        result["document"] = doc
        cpus, mem = v.cpus, v.mem
        console, probe_log = work / "console.log", work / "probe.log"
        cmdline = " ".join([
            "console=ttyS0", "root=/dev/vda", "rootfstype=ext4", "rw", "panic=-1",
            "loglevel=4", "net.ifnames=0",
            f"ip={GUEST_ADDR}::{HOST_ADDR}:255.255.255.0::eth0:off",
            "systemd.show_status=error",
        ] + (["systemd.journald.forward_to_console=1"] if os.environ.get("E2B_BOOT_DEBUG") else []))
        with Netns(v.id) as ns:
            mac = "52:54:00:e2:b0:01"
            argv = ["qemu-system-x86_64", "-accel", accel, "-M", "q35", "-cpu", "max",
                    "-smp", str(cpus), "-m", str(mem), "-nodefaults", "-display", "none",
                    "-no-reboot", "-kernel", str(kin["kernel"]), "-initrd", str(initrd),
                    "-append", cmdline,
                    "-drive", f"file={overlay},if=virtio,format=qcow2,cache=unsafe",
                    "-fw_cfg", f"name=opt/e2b/mmds,file={work / 'mmds.json'}",
                    "-serial", f"file:{console}", "-serial", f"file:{probe_log}",
                    "-netdev", f"tap,id=n0,ifname={ns.tap},script=no,downscript=no",
                    "-device", f"virtio-net-pci,netdev=n0,mac={mac}"]
            qmp = work / "qmp.sock"
            if v.power_button:
                argv += ["-qmp", f"unix:{qmp},server=on,wait=off"]
            result["qemu"] = argv
            t0 = time.monotonic()
            qemu = subprocess.Popen(ns.exec_argv(argv), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            report: dict = {}
            while time.monotonic() < deadline:
                if probe_log.exists():
                    report = parse_report(probe_log.read_text(errors="replace"))
                    if report.get("done") == "1":
                        break
                if qemu.poll() is not None:
                    break
                time.sleep(0.5)
            result["host_wall_s"] = round(time.monotonic() - t0, 1)
            result["report"] = report
            if report.get("done") == "1":
                result["net"] = host_port_checks(ns)
                if v.sdk:
                    result["sdk"] = sdk_host.run_probes(ns.exec_argv, GUEST_ADDR, doc, token,
                                                        sdk_host.image_languages(rootfs),
                                                        only=v.sdk_probes, extra_env=dict(v.sdk_env))
                if v.power_button:
                    result["powerdown"] = power.press(str(qmp), qemu, min(120.0, max(30.0, deadline - time.monotonic())))
            elif qemu.poll() is not None:
                result["error"] = f"QEMU exited with {qemu.returncode} before the probe finished"
            else:
                result["error"] = f"probe not done within {timeout:.0f} s"
            _stop(qemu)
            out = qemu.stdout.read().decode(errors="replace") if qemu.stdout else ""
            result["qemu_output"] = out[-4000:]
            result["console"] = console.read_text(errors="replace") if console.exists() else ""
            if keep_logs:
                keep_logs.mkdir(parents=True, exist_ok=True)
                (keep_logs / f"{v.id}-console.log").write_text(result["console"])
                if probe_log.exists():
                    shutil.copy(probe_log, keep_logs / f"{v.id}-probe.log")
                (keep_logs / f"{v.id}-report.json").write_text(
                    json.dumps({k: v for k, v in result.items() if k != "console"}, indent=2))
        return result
    finally:
        if qemu is not None:
            _stop(qemu)
        shutil.rmtree(work, ignore_errors=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def main() -> int:
    sys.path[:0] = [str(HERE), str(HERE.parent)]  # checks, and testimages (tests/)
    import checks  # noqa: E402

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--flavor", default="e2b-rt")
    ap.add_argument("--variant", default="default",
                    help="which boot: " + ", ".join(sorted({v.name for v in ALL_VARIANTS})))
    ap.add_argument("--rootfs", type=pathlib.Path)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("E2B_BOOT_TIMEOUT", 0)) or None,
                    help="seconds (default: the variant's)")
    ap.add_argument("--logs", type=pathlib.Path, help="keep console log and report here")
    a = ap.parse_args()
    rootfs = a.rootfs or ROOT / "out" / a.flavor / "rootfs.ext4"
    try:
        v = variant(a.flavor, a.variant)
    except ValueError as e:
        print(f"vm.py: {e}", file=sys.stderr)
        return 2
    res = boot(v, rootfs, a.timeout, a.logs)
    failed = 0
    for name, ok, detail in checks.evaluate(res):
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
        failed += not ok
    print(checks.timing_line(res))
    if failed and not a.logs:
        print(res.get("console", "")[-3000:], file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
