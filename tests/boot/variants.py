"""The kinds of boot (tests/boot/vm.py boots one): which flavor, at what size,
with which test drop-ins, and who boots it (make test, the image workflow, or
a person, for the deliberately broken ones)."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Variant:
    """One kind of boot of a flavor.

    Pool sizes (contract): small = 1 vCPU / 512 MiB, medium = 2 vCPU / 1 GiB.
    mode "guard-fails": envd-guard's real ExecStart fails (no netlink), the
    fail-closed boot. stop_guard: the probe stops envd-guard after its checks,
    before the host's, so those measure the rules left behind."""
    flavor: str
    name: str
    cpus: int
    mem: int
    mode: str = "normal"
    stop_guard: bool = False
    timeout: float = 300.0
    sdk: bool = False  # E2B's SDKs drive the guest from the host after the probe (sdk_host.py)
    template_warmup: str = ""  # a template's pool warmup, run by guest/template.sh (test_template_boot.py)
    # What guest/template.sh looks at ((GET, a path of port 3000), (ENV, a name), (FILE, a path)).
    template_probe: tuple = ()
    # With sdk: only these of sdk_host.PROBES (all when empty), and env for them.
    sdk_probes: tuple = ()
    sdk_env: tuple = ()
    # The guest gets an ACPI power button (its kernel modules in the test
    # initramfs), and the host presses it at the end (power.py): logind
    # starts, and the press powers the guest off.
    power_button: bool = False

    @property
    def id(self) -> str:
        return self.flavor if self.name == "default" else f"{self.flavor}-{self.name}"


VARIANTS = [
    Variant("e2b-rt", "default", 1, 512, stop_guard=True),
    Variant("e2b-ci", "default", 2, 1024, timeout=600.0, sdk=True),
    # A sandbox whose guard failed is still one a pool must stop cleanly.
    Variant("e2b-ci", "guard-fails", 2, 1024, mode="guard-fails", power_button=True),
]
# Booted by the image workflow (`make boot-test flavor=e2b-ci variant=512m`),
# not by make test: e2b-ci's pool size is medium (contract), small is beyond
# it, and under TCG a 1-vCPU e2b-ci boot takes 6-12 minutes.
WORKFLOW_VARIANTS = [
    Variant("e2b-ci", "512m", 1, 512, timeout=720.0),
    # E2B's default sandbox, driven by E2B's SDKs from the host. make test
    # snapshots and restores it instead (tests/boot/test_clone_snapshot.py).
    Variant("e2b-base", "default", 2, 512, sdk=True, sdk_probes=("js", "py", "js-git", "py-git")),
]
# Deliberately broken images, booted by hand (`vm.py --variant NAME`), never
# by make test: the normal checks must fail on them. broken-open: the guard
# installs nothing and the API server binds 0.0.0.0 without its address
# filter (test drop-ins, guest/e2b-test-broken-*.conf).
BROKEN = [
    Variant("e2b-ci", "broken-open", 2, 1024, mode="broken-open", timeout=600.0, sdk=True),
]
ALL_VARIANTS = VARIANTS + WORKFLOW_VARIANTS + BROKEN
# Each mode's test drop-ins (guest/), by the drop-in directory they go in.
DROPINS = {
    "guard-fails": {"envd-guard.service.d": "e2b-test-guard-fails.conf"},
    "broken-open": {"envd-guard.service.d": "e2b-test-broken-guard-off.conf",
                    "code-interpreter.service.d": "e2b-test-broken-api-open.conf"},
}


def variant(flavor: str, name: str = "default") -> Variant:
    for v in ALL_VARIANTS:
        if (v.flavor, v.name) == (flavor, name):
            return v
    names = [v.name for v in ALL_VARIANTS if v.flavor == flavor]
    raise ValueError(f"no boot variant {name!r} of flavor {flavor!r}: "
                     f"pick one of {names}" if names else
                     f"no boot variants of flavor {flavor!r}: pick one of "
                     f"{sorted({v.flavor for v in ALL_VARIANTS})}")
