"""e2b-hostlink init and restore against the REAL envd (built from its pinned
source) in Firecracker mode, with a real mmds-serve whose document carries
the accessTokenHash /init checks, behind the hybrid-vsock stand-in
(fake_hybrid_vsock.py). The clone step of `restore` is the stand-in of
guest_standins.py where it must succeed (the real e2b-clone steps this
machine's clock), and the real e2b-clone where it refuses. Also: one
deadline per command (--timeout bounds the whole of it), against a guest
stand-in that answers just inside each step's own deadline."""
import hashlib
import json
import re
import secrets
import time

import pytest

from guest_standins import CloneStepStandIn, SlowGuest
from hostlink_helpers import fake_vmm, real_envd_fc, unanswering_socket, unix_http, wait_for
from relay_helpers import vsock_ports  # tests/relay, on the path through hostlink_helpers
from test_clone import Guest
from test_hostlink import hostlink

PORTS = vsock_ports()
ENVD, CONTROL, CLONE = PORTS["VSOCK_PORT_ENVD"], PORTS["VSOCK_PORT_MMDS_CONTROL"], PORTS["VSOCK_PORT_CLONE"]
STEP = re.compile(r"^step=(\w+) ms=(\d+)(?: (.*))?$")


def token_pair():
    token = secrets.token_hex(32)
    return token, hashlib.sha512(token.encode()).hexdigest()


def steps(stdout: str) -> dict:
    """{step: (ms, rest)} of the step=NAME ms=N lines; every line must be one."""
    out = {}
    for line in stdout.splitlines():
        m = STEP.match(line)
        assert m, f"not a step line: {line!r}"
        out[m[1]] = (int(m[2]), m[3] or "")
    return out


def stat_status(sock, token=None) -> tuple:
    headers = [("Content-Type", "application/json")] + ([("X-Access-Token", token)] if token else [])
    return unix_http(sock, "POST", "/filesystem.Filesystem/Stat", b'{"path":""}', headers)


@pytest.fixture
def fc_envd(tools, tmp_path):
    """(envd's socket, mmds-serve's control socket) of the real envd in Firecracker mode."""
    with real_envd_fc(tmp_path, tools.path("mmds-serve")) as socks:
        yield socks


def put_document(ctl, document: dict):
    status, body = unix_http(ctl, "PUT", "/mmds", json.dumps(document).encode(),
                             [("Content-Type", "application/json")])
    assert status // 100 == 2, body


# ------------------------------------------------------------------ init ---

def test_init_sets_the_documents_token(tools, tmp_path, fc_envd):
    envd, ctl = fc_envd
    token, digest = token_pair()
    put_document(ctl, {"instanceID": "isb-init", "accessTokenHash": digest})
    (tmp_path / "token").write_text(token + "\n")
    with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}"}) as uds:
        cp = hostlink(tools, uds, "init", "--token-file", tmp_path / "token", "--env", "GREETING=hello world",
                      "--env", "EMPTY=", "--user", "root", "--workdir", "/tmp", "--lifecycle-id", "life-1")
    assert cp.returncode == 0, cp.stderr
    assert set(steps(cp.stdout)) == {"init", "check"}, cp.stdout
    assert stat_status(envd, token)[0] == 200
    status, body = stat_status(envd)
    assert status == 401 and b"unauthorized access" in body, body
    status, body = unix_http(envd, "GET", "/envs", headers=[("X-Access-Token", token)])
    assert status == 200, body
    envs = json.loads(body)
    assert envs["GREETING"] == "hello world" and envs["EMPTY"] == "", envs
    assert unix_http(envd, "GET", "/envs")[0] == 401
    entry = json.loads(stat_status(envd, token)[1])["entry"]
    assert entry["path"] == "/tmp", entry  # the default workdir took


def test_init_token_from_stdin(tools, tmp_path, fc_envd):
    envd, ctl = fc_envd
    token, digest = token_pair()
    put_document(ctl, {"accessTokenHash": digest})
    with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}"}) as uds:
        cp = hostlink(tools, uds, "init", "--token-file", "-", input=token)
    assert cp.returncode == 0, cp.stderr
    assert stat_status(envd, token)[0] == 200


def test_init_with_a_token_the_document_does_not_hash_to(tools, tmp_path, fc_envd):
    envd, ctl = fc_envd
    token, digest = token_pair()
    put_document(ctl, {"accessTokenHash": digest})
    (tmp_path / "token").write_text(secrets.token_hex(32))
    with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}"}) as uds:
        cp = hostlink(tools, uds, "init", "--token-file", tmp_path / "token")
    assert cp.returncode == 1, cp.stderr
    assert f"{uds} port {ENVD} (envd): POST /init: envd refused the access token (it does not hash to the " \
           "accessTokenHash of the clone's metadata document" in cp.stderr, cp.stderr
    assert "HTTP 401: access token validation failed" in cp.stderr, cp.stderr
    assert cp.stdout == ""
    assert stat_status(envd)[0] == 200  # envd still has no token


def test_init_with_a_user_the_guest_does_not_have(tools, tmp_path, fc_envd):
    """envd takes /init (204: it does not look the user up), and the check
    call gets its 401 "invalid default user", passed on escaped: the C1
    control in the name comes back from envd raw (Go's JSON leaves
    U+0080-U+009F alone) and is shown as bytes."""
    envd, ctl = fc_envd
    token, digest = token_pair()
    put_document(ctl, {"accessTokenHash": digest})
    (tmp_path / "token").write_text(token)
    with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}"}) as uds:
        cp = hostlink(tools, uds, "init", "--token-file", tmp_path / "token", "--user", "nosuch\u009b")
    assert cp.returncode == 1, cp.stderr
    assert steps(cp.stdout).keys() == {"init"}, cp.stdout
    assert f"{uds} port {ENVD} (envd): the token check (filesystem.Filesystem/Stat with X-Access-Token): " \
           "envd took the token but not the default user: HTTP 401: " \
           "{\"code\":\"unauthenticated\",\"message\":\"invalid default user: 'nosuch\\xc2\\x9b'\"}" in cp.stderr, \
        cp.stderr
    assert "\u009b" not in cp.stderr and cp.stderr.count("\n") == 1


@pytest.mark.parametrize("args, why, code", [
    (["--token-file", "{missing}"], "--token-file {missing}: No such file or directory", 1),
    (["--token-file", "{empty}"], "--token-file {empty}: empty", 1),
    (["--token-file", "{newline}"], "--token-file {newline}: empty (the access token is its one line)", 1),
    (["--token-file", "{twolines}"], "--token-file {twolines}: byte 4 is a second line", 1),
    (["--token-file", "{token}", "--env", "NOEQUALS"], "--env 'NOEQUALS': no '=' (give NAME=VALUE", 2),
    (["--token-file", "{token}", "--workdir", "tmp"], "--workdir 'tmp': not an absolute path", 2),
    (["--token-file", "{token}", "--ca-bundle", "{missing}"], "--ca-bundle {missing}: No such file", 1),
    (["--token-file", "{token}", "--user", "\udcff"], "init: --user: not valid UTF-8", 2),
    (["--env", "A=1"], "init: --token-file FILE (or - for stdin) is required", 2),
    (["--token-file", "{token}", "--volume-mount", "data"], "--volume-mount 'data': expected PATH=NFS_TARGET", 2),
])
def test_init_bad_input_is_refused_before_any_connection(tools, tmp_path, args, why, code):
    files = {"missing": tmp_path / "absent", "empty": tmp_path / "empty", "newline": tmp_path / "newline",
             "twolines": tmp_path / "twolines", "token": tmp_path / "token"}
    files["empty"].write_text("")
    files["newline"].write_text("\n")
    files["twolines"].write_text("abc\ndef\n")
    files["token"].write_text("abc")
    fill = {k: str(v) for k, v in files.items()}
    guest = unanswering_socket(tmp_path / "v.sock")  # a connection would wait in its backlog
    try:
        cp = hostlink(tools, tmp_path / "v.sock", "init", *[a.format(**fill) for a in args])
        guest.setblocking(False)
        with pytest.raises(BlockingIOError):
            guest.accept()
    finally:
        guest.close()
    assert cp.returncode == code, cp.stderr
    assert why.format(**fill) in cp.stderr, cp.stderr


def test_init_missing_relay_names_socket_and_port(tools, tmp_path):
    with fake_vmm(tmp_path / "v.sock", {}) as uds:
        (tmp_path / "token").write_text("abc")
        cp = hostlink(tools, uds, "init", "--token-file", tmp_path / "token")
    assert cp.returncode == 1
    assert f"{uds} port {ENVD} (envd): POST /init: vsock port {ENVD}: handshake refused: the VMM closed the " \
           "connection (nothing listens on that guest port)" in cp.stderr, cp.stderr


def test_init_relay_that_never_answers_is_bounded_by_timeout(tools, tmp_path):
    sink = unanswering_socket(tmp_path / "sink.sock")
    (tmp_path / "token").write_text("abc")
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{tmp_path / 'sink.sock'}"}) as uds:
            t0 = time.monotonic()
            cp = hostlink(tools, uds, "--timeout", "1", "init", "--token-file", tmp_path / "token", timeout=15)
            took = time.monotonic() - t0
    finally:
        sink.close()
    assert cp.returncode == 1
    assert f"{uds} port {ENVD} (envd): POST /init: no complete answer before --timeout ran out (0 bytes so far)" \
        in cp.stderr, cp.stderr
    assert took < 1 + 0.8, took  # a bound (1 s and the process's start), not a speed target


# --------------------------------------------------------------- restore ---

def test_restore_end_to_end(tools, tmp_path, fc_envd):
    """Clone step (the stand-in, installing the document into the real
    mmds-serve), /health, /init with the token the document hashes to, and
    the authenticated check: every step timed, exit 0."""
    envd, ctl = fc_envd
    token, digest = token_pair()
    (tmp_path / "token").write_text(token)
    (tmp_path / "clone.json").write_text(json.dumps({"instanceID": "isb-restored", "accessTokenHash": digest}))
    step = CloneStepStandIn(tmp_path / "clone-step.sock", ctl)
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}", CLONE: f"unix:{step.path}"}) as uds:
            t0 = time.time()
            cp = hostlink(tools, uds, "restore", "--generation", "4", "--document", tmp_path / "clone.json",
                          "--token-file", tmp_path / "token", "--user", "root", "--env", "POOL=warm")
    finally:
        step.close()
    assert cp.returncode == 0, cp.stderr
    got = steps(cp.stdout)
    assert list(got) == ["clone", "health", "init", "check", "restore"], cp.stdout
    assert got["clone"][1] == "generation=4 document=installed stand_in=yes", got
    assert re.fullmatch(r"tries=\d+", got["health"][1]), got
    assert got["restore"][0] >= sum(ms for name, (ms, _) in got.items() if name != "restore") - 5, got
    first, fields, document, _ = step.requests[0]
    assert first == "E2B-CLONE/1 clone" and fields["generation"] == "4"
    assert json.loads(document)["accessTokenHash"] == digest
    assert abs(float(fields["realtime"]) - t0) < 30, fields  # the host's clock
    assert stat_status(envd, token)[0] == 200 and stat_status(envd)[0] == 401
    def envs():
        return json.loads(unix_http(envd, "GET", "/envs", headers=[("X-Access-Token", token)])[1])
    assert envs()["POOL"] == "warm", envs()
    # envd re-reads the document's ids in the background after /init (up to 60 s).
    assert wait_for(lambda: envs()["E2B_SANDBOX_ID"] == "isb-restored"), envs()


def test_restore_stops_at_a_refused_clone_step(tools, tmp_path):
    """The real e2b-clone refuses a generation that goes backwards: restore
    says so, and never reaches envd (whose port here counts connections)."""
    tmp_path.chmod(0o755)
    guest = Guest(tools, tmp_path)
    guest.gen.write_text("7\n")
    envd = unanswering_socket(tmp_path / "envd.sock")
    (tmp_path / "token").write_text("abc")
    (tmp_path / "clone.json").write_text('{"instanceID": "isb-x"}')
    try:
        with fake_vmm(tmp_path / "v.sock", {CLONE: f"unix:{guest.sock}", ENVD: f"unix:{envd.getsockname()}"}) as uds:
            cp = hostlink(tools, uds, "restore", "--generation", "3", "--document", tmp_path / "clone.json",
                          "--token-file", tmp_path / "token")
        envd.setblocking(False)
        with pytest.raises(BlockingIOError):
            envd.accept()
    finally:
        envd.close()
        guest.close()
    assert cp.returncode == 1, cp.stderr
    assert f"{uds} port {CLONE} (clone step): clone refused: ERR " in cp.stderr, cp.stderr
    assert "generation" in cp.stderr and cp.stdout == "", (cp.stdout, cp.stderr)
    assert guest.gen.read_text() == "7\n"


def test_restore_wrong_token_stops_at_init(tools, tmp_path, fc_envd):
    envd, ctl = fc_envd
    _, digest = token_pair()
    (tmp_path / "token").write_text(secrets.token_hex(32))
    (tmp_path / "clone.json").write_text(json.dumps({"accessTokenHash": digest}))
    step = CloneStepStandIn(tmp_path / "clone-step.sock", ctl)
    try:
        with fake_vmm(tmp_path / "v.sock", {ENVD: f"unix:{envd}", CLONE: f"unix:{step.path}"}) as uds:
            cp = hostlink(tools, uds, "restore", "--generation", "1", "--document", tmp_path / "clone.json",
                          "--token-file", tmp_path / "token")
    finally:
        step.close()
    assert cp.returncode == 1
    assert list(steps(cp.stdout)) == ["clone", "health"], cp.stdout
    assert "POST /init: envd refused the access token" in cp.stderr, cp.stderr


def test_restore_bad_input(tools, tmp_path):
    (tmp_path / "token").write_text("abc")
    cp = hostlink(tools, tmp_path / "v.sock", "restore", "--generation", "1", "--token-file", tmp_path / "token")
    assert cp.returncode == 2 and "restore: --generation N and --document FILE are required" in cp.stderr
    cp = hostlink(tools, tmp_path / "v.sock", "restore", "--generation", "1", "--document", tmp_path / "absent",
                  "--token-file", tmp_path / "token")
    assert cp.returncode == 1 and f"--document {tmp_path / 'absent'}: No such file" in cp.stderr, cp.stderr


# ------------------------------------------------ one deadline a command ---

DELAY = 0.8  # each step alone is inside --timeout 1; two are not
MARGIN = 0.6  # the process's start and exit; a bound, not a speed target


@pytest.mark.parametrize("args", [
    ["clone", "--generation", "5"],
    ["clone"],
    ["wait", "--generation", "1"],
    ["mmds", "get"],
    ["wait"],
    ["init", "--token-file", "{token}"],
    ["restore", "--generation", "1", "--document", "{doc}", "--token-file", "{token}"],
], ids=lambda a: " ".join(a[:3]).replace("{", "").replace("}", ""))
def test_timeout_bounds_the_whole_command(tools, tmp_path, args):
    """Before, each exchange started a fresh deadline once link_open had
    spent one: `--timeout 1 clone --generation 5` took 1.86 s against such
    a guest, `clone` 3.71 s, `wait --generation 1` 1.92 s. With a budget
    that fits, the same stand-in lets each command through."""
    (tmp_path / "token").write_text("abc")
    (tmp_path / "doc.json").write_text("{}")
    argv = [a.format(token=tmp_path / "token", doc=tmp_path / "doc.json") for a in args]
    guest = SlowGuest(tmp_path / "v.sock", DELAY)
    try:
        t0 = time.monotonic()
        cp = hostlink(tools, guest.path, "--timeout", "1", *argv, timeout=30)
        took = time.monotonic() - t0
        assert cp.returncode == 1, (cp.stdout, cp.stderr)
        assert took < 1 + MARGIN, (took, cp.stderr)
        if args[0] != "wait":  # a wait's last attempt is cut short by its budget alone
            assert "time" in cp.stderr or "within" in cp.stderr, cp.stderr
        cp = hostlink(tools, guest.path, "--timeout", "20", *argv, timeout=60)
        assert cp.returncode == 0, (cp.stdout, cp.stderr)
    finally:
        guest.close()
