"""Bench only: a oneshot unit of the bench's own in a boot of tests/boot/vm.py's
harness, ordered before the boot probe, running a shell script that reports
`E2B-PROBE bench_*=` lines as the probe does (vm.parse_report reads them).
Shared by bench/e2b-ci-vm-memory.py and bench/e2b-base-vm-memory.py."""
import vm

UNIT = """[Unit]
Description=Bench only: {description}
DefaultDependencies=no
After=envd.service
Before=e2b-test-probe.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/bash /run/e2b-test/bench-memory.sh
TimeoutStartSec=infinity
"""

# The script's first lines: report KEY VALUE and report_b64 KEY TEXT.
REPORT = r"""set -u
out=/dev/ttyS1
report() { printf 'E2B-PROBE %s=%s\n' "$1" "$2" > "$out"; }
report_b64() { report "$1" "$(printf '%s' "$2" | base64 -w0)"; }
"""


def add_bench_unit(description: str, script: str) -> None:
    """Every later vm boot's payload gets the unit (DESCRIPTION) and SCRIPT
    (after REPORT's functions), in place of an earlier call's."""
    original = vm.build_payload
    if hasattr(original, "bench_original"):
        original = original.bench_original

    def build_payload(dest, variant, kin, ci_tries):
        original(dest, variant, kin, ci_tries)
        units = dest / "systemd" / "system"
        (units / "e2b-bench-memory.service").write_text(UNIT.format(description=description))
        (units / "multi-user.target.wants" / "e2b-bench-memory.service").symlink_to(
            "../e2b-bench-memory.service")
        (dest / "e2b-test" / "bench-memory.sh").write_text(REPORT + script)

    build_payload.bench_original = original
    vm.build_payload = build_payload
