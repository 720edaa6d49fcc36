"""Test only: what an E2B user does first in `Sandbox.create()`'s sandbox,
with the real, unmodified `e2b` SDK from PyPI (build/py-sdk), against the
e2b-base tree's real envd through e2b-hostlink forward: every tool of E2B's
`base` answers, and every install path works as the default user and with
sudo. Packages come from tests/sdk/package_index.py, which the stack serves
on the guest's loopback (E2B_SDK_INDEX_URL; pip --index-url, npm
--registry), never from the internet. One line per case (CASE <name>
<json>); the expected values live in test_sdk_base.py."""
import os

from sdk_session import TOKEN, as_control_plane_gives, case, cases, post_init, report

INDEX = os.environ["E2B_SDK_INDEX_URL"]
PIP = f"--index-url {INDEX}/simple"
NPM = f"--registry {INDEX}/npm/"
state = {}

# Each tool as a user runs it first; the first line of its answer.
TOOLS = {
    "python3": "python3 --version", "pip": "pip --version", "pip3": "pip3 --version",
    "venv": "python3 -m venv /tmp/probe-venv && /tmp/probe-venv/bin/python -c 'import sys; print(sys.prefix)'",
    "node": "node --version", "npm": "npm --version", "yarn": "yarn --version",
    "gcc": "gcc --version", "g++": "g++ --version", "make": "make --version",
    "git": "git --version", "gh": "gh --version", "curl": "curl --version",
    "sudo": "sudo -n true && echo sudo-ok", "lsblk": "lsblk --version",
}


def run(cmd: str, user: str = "user") -> dict:
    """One command as the SDK runs it (bash -l through envd): its exit code and output."""
    r = state["sbx"].commands.run(cmd, user=user, timeout=300, on_stderr=None)
    return {"exit": r.exit_code, "stdout": r.stdout.strip()}


def attempt(cmd: str, user: str = "user") -> dict:
    """run(), with a failed command's exit code and output as the observation."""
    try:
        return run(cmd, user)
    except Exception as e:  # noqa: BLE001 - CommandExitException carries the result
        return {"exit": getattr(e, "exit_code", None), "stdout": (getattr(e, "stdout", "") or "").strip(),
                "stderr": (getattr(e, "stderr", "") or str(e)).strip()[-1500:]}


@case
def base_init():
    init = post_init({"accessToken": TOKEN, "defaultUser": "user"})
    state["sbx"] = as_control_plane_gives(init.headers.get("x-envd-version"))
    return {"initStatus": init.status_code, "whoami": run("id -un")["stdout"]}


@case
def base_tools():
    out = {}
    for tool, cmd in TOOLS.items():
        r = attempt(cmd)
        out[tool] = {"exit": r["exit"], "first": (r["stdout"] or r.get("stderr", "")).splitlines()[:1]}
    return out


def install_case(install: str, use: str) -> dict:
    """INSTALL, then USE in a new login shell: the install's exit code and tail, and what USE printed."""
    done = attempt(install)
    return {"install": done["exit"], "installTail": done.get("stderr", done["stdout"])[-800:], "use": attempt(use)}


def imports(module: str) -> str:
    """Import MODULE (a probe package), print its name and file, then run its console script."""
    return f"python3 -c 'import {module} as m; print(m.NAME, m.__file__)' && {module.replace('_', '-')}"


@case
def base_pip_user():
    return install_case(f"pip install {PIP} e2b-probe-pipuser", imports("e2b_probe_pipuser"))


@case
def base_pip_sudo():
    return install_case(f"sudo pip install {PIP} e2b-probe-pipsudo", imports("e2b_probe_pipsudo"))


@case
def base_npm_project():
    return install_case("mkdir -p ~/proj && cd ~/proj && npm init -y >/dev/null && "
                        f"npm install {NPM} e2b-probe-npmproj",
                        "cd ~/proj && node -e 'console.log(require(\"e2b-probe-npmproj\").name)'")


@case
def base_npm_global_user():
    return install_case(f"npm install -g {NPM} e2b-probe-npmglobal",
                        "e2b-probe-npmglobal && command -v e2b-probe-npmglobal")


@case
def base_npm_global_sudo():
    return install_case(f"sudo npm install -g {NPM} e2b-probe-npmsudo",
                        "e2b-probe-npmsudo && command -v e2b-probe-npmsudo")


@case
def base_compile():
    state["sbx"].files.write("/home/user/hello.c", '#include <stdio.h>\nint main(void) { puts("compiled"); }\n')
    return attempt("cd ~ && gcc -O2 -o hello hello.c && ./hello")


report(cases)
