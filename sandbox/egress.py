"""The sandbox's way out to the network: its own network namespace, owned by
the host's user namespace (so root inside has no CAP_NET_ADMIN over it and
can neither change its routes nor its firewall), with one tap device whose
other end is slirp4netns, a user-mode TCP/IP stack on the host.

What leaves through the tap is filtered in that namespace, before slirp4netns
sees it: no IPv6 at all; nothing to the host's loopback (slirp4netns's
gateway address, 10.0.2.2, and 127.0.0.0/8), to link-local 169.254.0.0/16
(a cloud's instance metadata service), to any address of the host's own
interfaces, to multicast or broadcast, nor to any CIDR the operator adds
(`sandbox_deny=`). DNS goes to slirp4netns's forwarder (10.0.2.3), which asks
the host's resolvers. Everything else (apt's and pip's mirrors) is reached.

A unix socket of the host, abstract or not, is out of reach too: abstract
sockets belong to a network namespace, and no host path is mounted in.
"""
import ipaddress
import json
import os
import select
import subprocess
import tempfile

from sandbox import mounts

TAP = "tap0"
GATEWAY = "10.0.2.2"
DNS = "10.0.2.3"
# What the sandbox never reaches, whatever the host's addresses.
ALWAYS_DENIED = ("0.0.0.0/8", "10.0.2.0/24", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/3")
READY_TIMEOUT = 10
RESOLV_CONF = f"# The build sandbox's resolver: slirp4netns's forwarder (sandbox/egress.py)\nnameserver {DNS}\n"


class EgressError(Exception):
    pass


def host_addresses() -> list[str]:
    """Every IPv4 address of the host's own interfaces (slirp4netns connects
    from the host: to it, each of them is the host)."""
    try:
        cp = subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True, text=True, check=True)
        data = json.loads(cp.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        raise EgressError(f"the host's own addresses (ip -j -4 addr show): {e}") from None
    return sorted({a["local"] for i in data for a in i.get("addr_info", []) if a.get("family") == "inet"})


def check_cidrs(cidrs) -> list[str]:
    out = []
    for c in cidrs:
        try:
            net = ipaddress.ip_network(c, strict=False)
        except ValueError:
            raise EgressError(f"sandbox_deny: '{c}' is not an address or a CIDR (e.g. 10.20.0.0/16)") from None
        if net.version != 4:
            raise EgressError(f"sandbox_deny: '{c}' is IPv6: the sandbox has no IPv6 at all; give IPv4 CIDRs")
        out.append(str(net))
    return out


def ruleset(denied) -> str:
    """The namespace's nftables rules: its own loopback, DNS to the
    forwarder, and every address but the denied ones."""
    nets = ", ".join(dict.fromkeys([*ALWAYS_DENIED, *denied]))
    return f"""table inet e2b_sandbox {{
    chain egress {{
        type filter hook output priority 0; policy accept;
        oifname "lo" accept
        meta nfproto ipv6 reject with icmpx type admin-prohibited
        ip daddr {DNS} meta l4proto {{ tcp, udp }} th dport 53 accept
        ip daddr {{ {nets} }} reject with icmpx type admin-prohibited
        ip daddr 255.255.255.255 reject with icmpx type admin-prohibited
    }}
}}
"""


def apply_rules(text: str):
    """In the calling process's network namespace (as the host's root)."""
    try:
        cp = subprocess.run(["nft", "-f", "-"], input=text, capture_output=True, text=True)
    except FileNotFoundError:
        raise EgressError("nft is not installed (make deps): the sandbox's network cannot be filtered") from None
    if cp.returncode != 0:
        raise EgressError(f"the sandbox's nftables rules: {cp.stderr.strip()}")


def loopback_up():
    """--network none: the namespace's own loopback, nothing else."""
    cp = subprocess.run(["ip", "link", "set", "lo", "up"], capture_output=True, text=True)
    if cp.returncode != 0:
        raise EgressError(f"the sandbox's loopback: {cp.stderr.strip()}")


class Slirp:
    """slirp4netns serving the network namespace of process PID."""

    def __init__(self, pid: int):
        ready_r, ready_w = os.pipe()
        self._exit_r, self._exit_w = os.pipe()
        os.set_inheritable(self._exit_w, False)
        argv = ["slirp4netns", "--configure", "--mtu=65520", "--disable-host-loopback",
                "--enable-sandbox", "--enable-seccomp", f"--ready-fd={ready_w}", f"--exit-fd={self._exit_r}",
                "--netns-type=path", f"/proc/{pid}/ns/net", TAP]
        self._log = tempfile.TemporaryFile()
        try:
            # In a private mount namespace of its own: slirp4netns's
            # --enable-sandbox makes only its root private before it detaches
            # the old root, and the umounts of the mounts below, the host's
            # /run/netns/* among them, reached the host, breaking every
            # network namespace named there.
            self.proc = subprocess.Popen(argv, pass_fds=(ready_w, self._exit_r), stdin=subprocess.DEVNULL,
                                         stdout=self._log, stderr=self._log, preexec_fn=mounts.private_namespace)
        except FileNotFoundError:
            raise EgressError("slirp4netns is not installed (make deps): the sandbox's only way out") from None
        finally:
            os.close(ready_w)
            os.close(self._exit_r)
        try:
            ready, _, _ = select.select([ready_r], [], [], READY_TIMEOUT)
            ok = bool(ready) and os.read(ready_r, 1) == b"1"
        finally:
            os.close(ready_r)
        if not ok:
            self.stop()
            raise EgressError(f"slirp4netns did not bring the sandbox's network up in {READY_TIMEOUT} s: "
                              f"{self.errors()}")

    def errors(self) -> str:
        self._log.seek(0)
        text = self._log.read(4096).decode(errors="replace").strip()
        return text or f"exit status {self.proc.returncode}"

    def stop(self):
        if self._exit_w is not None:
            os.close(self._exit_w)
            self._exit_w = None
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
