"""What the boot must show of E2B's real SDKs driving the guest from the
host (tests/boot/sdk_host.py): every case of tests/sdk's probes, judged by
the same expectations as the namespace layer (tests/sdk/expectations.py),
one check each (sdk_js_commands_run, sdk_py-ci_ci_chart, sdk_js-git_git_push_user, ...). Merged into
checks.py's table for the variants that run them (Variant.sdk)."""
from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "sdk"))

import expectations  # noqa: E402
from sdk_host import BOOT_LANGUAGE_CASES, PROBES  # noqa: E402
from testimages import CI_LANGUAGE_KERNEL  # noqa: E402

# The language of each of the boot's per-language cases (ci_js_answer -> js).
CASE_LANGUAGE = {name: name.split("_")[1] for name in BOOT_LANGUAGE_CASES}


def _served(run: dict, name: str) -> bool:
    """Whether NAME is a case the image serves: not a per-language case, or
    one whose language the image's kernels serve."""
    return name not in CASE_LANGUAGE or CASE_LANGUAGE[name] in run.get("languages", [])


def _case(probe: str, name: str, judge):
    def check(res):
        run = res.get("sdk", {}).get(probe)
        if not run:
            return False, f"no run of the {probe} probe (the SDKs ran only after a finished probe)"
        if not _served(run, name):
            return True, (f"{probe} {name}: not run, the image was built without the "
                          f"{CI_LANGUAGE_KERNEL[CASE_LANGUAGE[name]]} kernel")
        obs = run["cases"].get(name)
        if obs is None:
            return False, f"{probe}: no CASE {name} (rc {run['rc']}): {run['tail'][-1500:]}"
        if "error" in obs:
            return False, f"{probe} {name}: {obs['error']}"
        try:
            judge(obs, probe.split("-")[0], res.get("report", {}).get("envd_version_file", "").strip())
        except AssertionError as e:
            return False, f"{probe} {name}: {e or obs}"
        return True, f"{probe} {name}: as expected"
    return check


def _equals(want):
    def judge(obs, sdk, envd_version):
        if callable(want):
            want(obs)
        else:
            assert obs == want, f"{obs} != {want}"
    return judge


def _complete(probe: str, names):
    """Every case reported, the probe exited 0, and it started from a clone's
    state without an access token (the guest's reset answered)."""
    def check(res):
        run = res.get("sdk", {}).get(probe, {})
        got = sorted(run.get("cases", {}))
        return (got == sorted(n for n in names if _served(run, n)) and run.get("rc") == 0 and run.get("reset") == "init=204 envs=200",
                f"{probe}: rc {run.get('rc')}, reset {run.get('reset')!r}, cases {got}; {run.get('tail', '')[-800:]}")
    return check


def start_state(res):
    """Before the SDKs: the vsock section's token was dropped by an /init that
    a sha512("") accessTokenHash authorizes, and envd is open again."""
    rep = res.get("report", {})
    return (rep.get("sdk_token_reset_code") == "204" and rep.get("sdk_envs_open") == "200",
            f"/init without a token -> {rep.get('sdk_token_reset_code')}, GET /envs -> {rep.get('sdk_envs_open')}")


def _table() -> dict:
    table = {"sdk_start_state": start_state}
    ci = {**expectations.CI_EXPECTED, **{n: expectations.CI_LANGUAGE_EXPECTED[n] for n in BOOT_LANGUAGE_CASES}}
    tables = {"ci": {n: _equals(w) for n, w in ci.items()},
              "git": expectations.GIT_CHECKS, "": expectations.CHECKS}
    for probe in PROBES:
        judges = tables[probe.partition("-")[2]]
        table[f"sdk_{probe}_complete"] = _complete(probe, list(judges))
        for name, judge in judges.items():
            table[f"sdk_{probe}_{name}"] = _case(probe, name, judge)
    return table


SDK = _table()
