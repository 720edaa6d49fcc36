"""envd-guard against the real kernel: nftables and rtnetlink in network
namespaces this test creates (guest + peer over a veth pair) and removes.

Every test takes the `tools` fixture, so it runs against the release build
and the ASan+UBSan build."""
import os
import re
import shutil
import subprocess

import pytest

from harness import ROOT, assert_no_sanitizer_report, require_root
from guardnet import ALIAS, GUEST_V4, GUEST_V6, NetPair

GUARDED = (49983, 49999, 8888)
UNGUARDED = 8080

EXPECTED_TABLE = """table inet e2b_guard {
\tchain input {
\t\ttype filter hook input priority raw; policy accept;
\t\tiifname != "lo" tcp dport 49983 drop
\t\tiifname != "lo" tcp dport 49999 drop
\t\tiifname != "lo" tcp dport 8888 drop
\t\tiifname != "lo" ip daddr 169.254.169.254 tcp dport 80 drop
\t}
}
"""

USER_TABLE = """table inet filter {
\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\ttcp dport 12345 accept
\t}
}
"""


@pytest.fixture
def net():
    require_root()
    pair = NetPair()
    yield pair
    pair.close()


@pytest.fixture
def guest():
    require_root()
    pair = NetPair(with_peer=False)
    yield pair
    pair.close()


def _in_ns(tools, ns, *args, prefix=()):
    """Runs envd-guard inside namespace `ns`; fails on sanitizer reports."""
    cp = ns.run(*prefix, tools.path("envd-guard"), *args)
    assert_no_sanitizer_report(cp)
    return cp


def installed(tools, pair, *args):
    cp = _in_ns(tools, pair.guest, "install", *args)
    assert cp.returncode == 0, cp.stderr
    return cp


def handles(pair):
    """Rule handles of our chain, in order, from `nft -a`."""
    out = pair.nft("-a", "list", "chain", "inet", "e2b_guard", "input").stdout
    return [(m.group(1).strip(), int(m.group(2))) for m in re.finditer(r"^\s+(.*?) # handle (\d+)$", out, re.M)
            if not m.group(1).startswith("chain ")]


def test_guard_drops_from_outside_allows_lo(tools, net):
    net.guest.run("nft", "-f", "-", input=USER_TABLE, check=True)
    before = net.nft("list", "ruleset").stdout
    assert before == USER_TABLE

    # Dual-stack listeners, and one on the MMDS address bound with
    # IP_FREEBIND (as mmds.socket does), so it serves once the alias exists.
    net.listen(*(f":::{p}" for p in (*GUARDED, UNGUARDED)), f"{ALIAS}:80")

    # Control: unguarded, the peer reaches every guarded port, v4 and v6.
    targets = [f"{GUEST_V4}:{p}" for p in GUARDED]
    assert set(net.probe(net.peer, *targets, f"[{GUEST_V6}]:{GUARDED[0]}").values()) == {"connected"}

    cp = installed(tools, net)
    assert "installed table inet e2b_guard (4 rules)" in cp.stderr

    after = net.nft("list", "ruleset").stdout
    assert after == USER_TABLE + EXPECTED_TABLE, after
    assert net.nft("list", "table", "inet", "filter").stdout == USER_TABLE

    from_peer = net.probe(net.peer, *targets, f"{GUEST_V4}:{UNGUARDED}", f"{ALIAS}:80",
                          f"[{GUEST_V6}]:{GUARDED[0]}", f"[{GUEST_V6}]:{GUARDED[2]}", f"[{GUEST_V6}]:{UNGUARDED}")
    assert from_peer == {
        **{t: "timeout" for t in targets},
        f"{GUEST_V4}:{UNGUARDED}": "connected",
        f"{ALIAS}:80": "timeout",
        f"[{GUEST_V6}]:{GUARDED[0]}": "timeout",
        f"[{GUEST_V6}]:{GUARDED[2]}": "timeout",
        f"[{GUEST_V6}]:{UNGUARDED}": "connected",
    }

    inside = net.probe(net.guest, *(f"127.0.0.1:{p}" for p in GUARDED), f"{ALIAS}:80",
                       *(f"[::1]:{p}" for p in GUARDED), timeout=5)
    assert set(inside.values()) == {"connected"}, inside

    # Rerun: same ruleset, byte for byte, no duplicates.
    installed(tools, net)
    assert net.nft("list", "ruleset").stdout == after
    cp = _in_ns(tools, net.guest, "check")
    assert cp.returncode == 0, cp.stderr
    assert "intact" in cp.stderr

    cp = _in_ns(tools, net.guest, "remove")
    assert cp.returncode == 0, cp.stderr
    assert net.nft("list", "ruleset").stdout == USER_TABLE
    assert ALIAS not in net.guest.run("ip", "-4", "addr", "show", "dev", "lo", check=True).stdout
    assert set(net.probe(net.peer, *targets).values()) == {"connected"}

    # Control for the alias: with the address back but no guard, the peer's
    # route via the veth does reach it, so the timeout above was the guard.
    net.guest.run("ip", "addr", "add", f"{ALIAS}/32", "dev", "lo", "scope", "host", check=True)
    assert net.probe(net.peer, f"{ALIAS}:80") == {f"{ALIAS}:80": "connected"}

    # remove is idempotent and leaves other tables alone.
    cp = _in_ns(tools, net.guest, "remove")
    assert cp.returncode == 0, cp.stderr
    assert net.nft("list", "ruleset").stdout == USER_TABLE


def table_handle(pair):
    out = pair.nft("-a", "list", "table", "inet", "e2b_guard").stdout
    return int(re.search(r"^table inet e2b_guard \{ # handle (\d+)$", out, re.M).group(1))


def install_action(cp):
    """What install says it did (--verbose): created, nothing committed, ...;
    the differences it found come before that line."""
    said = re.findall(r"^envd-guard: install: table inet e2b_guard (.*)$", cp.stderr, re.M)
    assert said, cp.stderr
    return said[-1]


def test_install_creates_keeps_or_replaces(tools, guest):
    """Absent: created in one batch. Identical: nothing committed (the table
    and every rule keep their handles). Different: replaced atomically."""
    cp = installed(tools, guest, "--verbose")
    assert install_action(cp) == "absent: created"
    assert guest.nft("list", "ruleset").stdout == EXPECTED_TABLE
    table, rules = table_handle(guest), handles(guest)

    cp = installed(tools, guest, "--verbose")
    assert install_action(cp) == "already intact: nothing committed"
    assert (table_handle(guest), handles(guest)) == (table, rules)

    guest.nft("add", "rule", "inet", "e2b_guard", "input", "tcp", "dport", "22", "accept")
    cp = installed(tools, guest, "--verbose")
    assert install_action(cp) == "different: replaced"
    assert "install: unexpected rule" in cp.stderr
    assert guest.nft("list", "ruleset").stdout == EXPECTED_TABLE
    assert table_handle(guest) != table
    assert _in_ns(tools, guest.guest, "check").returncode == 0

    # A dormant table is different too, though every rule is in place.
    guest.nft("add", "table", "inet", "e2b_guard", "{ flags dormant; }")
    cp = installed(tools, guest, "--verbose")
    assert install_action(cp) == "different: replaced"
    assert guest.nft("list", "ruleset").stdout == EXPECTED_TABLE


@pytest.fixture
def race_shim(tmp_path):
    """tests/guard/race_shim.c built as an LD_PRELOAD library (test code,
    never shipped)."""
    cc = shutil.which("cc")
    if not cc:
        pytest.fail("cc is missing")
    shim = tmp_path / "race_shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o", str(shim),
                    str(ROOT / "tests" / "guard" / "race_shim.c"), "-ldl"], check=True, timeout=120)
    return shim


def test_install_falls_back_to_replace_when_the_table_appears(tools, guest, race_shim, tmp_path):
    """Another process creates the table between install's look and its
    create batch: the create fails with EEXIST and install replaces."""
    mark = tmp_path / "raced"
    env = ("env", f"LD_PRELOAD={race_shim}", f"GUARD_RACE_NFT={shutil.which('nft')}", f"GUARD_RACE_MARK={mark}",
           "ASAN_OPTIONS=verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
    cp = _in_ns(tools, guest.guest, "install", "--verbose", prefix=env)
    assert cp.returncode == 0, cp.stderr
    assert mark.read_text() == "raced\n", "the shim did not create the table before the batch"
    assert install_action(cp) == "created by another process meanwhile: replaced"
    assert guest.nft("list", "ruleset").stdout == EXPECTED_TABLE
    assert _in_ns(tools, guest.guest, "check").returncode == 0

    # Control: the shim stays quiet once install has nothing to create.
    cp = _in_ns(tools, guest.guest, "install", "--verbose", prefix=env)
    assert install_action(cp) == "already intact: nothing committed"
    assert mark.read_text() == "raced\n"


def test_check_reports_deleted_rule(tools, guest):
    installed(tools, guest)
    rules = handles(guest)
    assert [r for r, _ in rules] == [
        'iifname != "lo" tcp dport 49983 drop', 'iifname != "lo" tcp dport 49999 drop',
        'iifname != "lo" tcp dport 8888 drop', 'iifname != "lo" ip daddr 169.254.169.254 tcp dport 80 drop']
    guest.nft("delete", "rule", "inet", "e2b_guard", "input", "handle", rules[1][1])
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert "envd-guard: rule 'drop tcp dport 49999 iifname != lo' is missing" in cp.stderr
    assert "49983" not in cp.stderr and "8888" not in cp.stderr

    guest.nft("delete", "rule", "inet", "e2b_guard", "input", "handle", rules[3][1])
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert "rule 'drop tcp to 169.254.169.254:80 iifname != lo' is missing" in cp.stderr

    installed(tools, guest)
    assert _in_ns(tools, guest.guest, "check").returncode == 0


def test_check_reports_missing_alias(tools, guest):
    installed(tools, guest)
    guest.guest.run("ip", "addr", "del", f"{ALIAS}/32", "dev", "lo", check=True)
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert "alias 169.254.169.254/32 on lo is missing" in cp.stderr
    assert "rule" not in cp.stderr

    # Same address, wrong scope: reported, and install repairs it.
    guest.guest.run("ip", "addr", "add", f"{ALIAS}/32", "dev", "lo", check=True)
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1 and "scope global, expected /32 scope host" in cp.stderr
    installed(tools, guest)
    assert _in_ns(tools, guest.guest, "check").returncode == 0


def test_check_reports_added_and_altered_rules(tools, guest):
    installed(tools, guest)
    guest.nft("add", "rule", "inet", "e2b_guard", "input", "tcp", "dport", "22", "accept")
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert "unexpected rule" in cp.stderr and "accept" in cp.stderr
    assert "is missing" not in cp.stderr

    installed(tools, guest)
    assert _in_ns(tools, guest.guest, "check").returncode == 0
    handle = handles(guest)[0][1]
    guest.nft("replace", "rule", "inet", "e2b_guard", "input", "handle", handle,
              "iifname", "!=", "lo", "tcp", "dport", "49984", "drop")
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert "rule 'drop tcp dport 49983 iifname != lo' is missing" in cp.stderr
    assert "unexpected rule" in cp.stderr

    installed(tools, guest)
    guest.nft("replace", "rule", "inet", "e2b_guard", "input", "handle", handles(guest)[0][1],
              "iifname", "!=", "lo", "tcp", "dport", "49983", "drop", "comment", '"x"')
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1 and "rule 'drop tcp dport 49983 iifname != lo' is missing" in cp.stderr


@pytest.mark.parametrize("change, finding", [
    (["add", "chain", "inet", "e2b_guard", "input", "{ policy drop; }"], "policy is drop, expected accept"),
    (["add", "table", "inet", "e2b_guard", "{ flags dormant; }"], "dormant: the guard is off"),
    (["add", "chain", "inet", "e2b_guard", "other"], "unexpected chain 'other'"),
    (["add", "set", "inet", "e2b_guard", "s", "{ type ipv4_addr; }"], "install does not create"),
    (["delete", "chain", "inet", "e2b_guard", "input"], "chain inet e2b_guard input is missing"),
    (["delete", "table", "inet", "e2b_guard"], "table inet e2b_guard is missing"),
])
def test_check_reports_table_and_chain_changes(tools, guest, change, finding):
    installed(tools, guest)
    if change[:2] == ["delete", "chain"]:
        guest.nft("flush", "chain", "inet", "e2b_guard", "input")
    guest.nft(*change)
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 1
    assert finding in cp.stderr, cp.stderr
    installed(tools, guest)
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 0, cp.stderr


def test_rules_nft_is_the_same_ruleset(tools, guest):
    """guard/rules.nft, loaded by the real nft CLI, is exactly what
    install creates: check accepts it, and both list identically."""
    guest.nft("-f", str(ROOT / "guard" / "rules.nft"))
    guest.guest.run("ip", "addr", "replace", f"{ALIAS}/32", "dev", "lo", "scope", "host", check=True)
    cp = _in_ns(tools, guest.guest, "check")
    assert cp.returncode == 0, cp.stderr
    listed = guest.nft("list", "ruleset").stdout
    installed(tools, guest)
    assert guest.nft("list", "ruleset").stdout == listed == EXPECTED_TABLE


def test_custom_ports_and_alias(tools, net):
    args = ("--ports", "2222,49983", "--alias", "10.99.0.1")
    net.listen(":::2222", ":::49983", ":::8888", "10.99.0.1:80")
    net.peer.run("ip", "route", "add", "10.99.0.1/32", "via", GUEST_V4, check=True)
    installed(tools, net, *args)
    assert _in_ns(tools, net.guest, "check", *args).returncode == 0
    cp = _in_ns(tools, net.guest, "check")
    assert cp.returncode == 1 and "rule 'drop tcp dport 49999 iifname != lo' is missing" in cp.stderr
    assert net.probe(net.peer, f"{GUEST_V4}:2222", f"{GUEST_V4}:49983", f"{GUEST_V4}:8888", "10.99.0.1:80") == {
        f"{GUEST_V4}:2222": "timeout", f"{GUEST_V4}:49983": "timeout",
        f"{GUEST_V4}:8888": "connected", "10.99.0.1:80": "timeout"}
    assert net.probe(net.guest, "10.99.0.1:80", "127.0.0.1:2222", timeout=5) == {
        "10.99.0.1:80": "connected", "127.0.0.1:2222": "connected"}
    assert _in_ns(tools, net.guest, "remove", *args).returncode == 0
    assert "10.99.0.1" not in net.guest.run("ip", "addr", "show", "dev", "lo", check=True).stdout


@pytest.mark.parametrize("command", ["install", "check", "remove"])
def test_without_cap_net_admin(tools, guest, command):
    if command != "install":
        installed(tools, guest)
    before = guest.nft("list", "ruleset").stdout
    cp = _in_ns(tools, guest.guest, command,
                prefix=("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--"))
    assert cp.returncode == 1, cp.stderr
    assert "Operation not permitted: needs CAP_NET_ADMIN" in cp.stderr
    assert f"envd-guard: {command}: nftables" in cp.stderr
    assert guest.nft("list", "ruleset").stdout == before


@pytest.mark.parametrize("args, message", [
    ([], "missing command"),
    (["start"], "unknown command 'start'"),
    (["install", "--ports", ""], "--ports: the list is empty"),
    (["install", "--ports", "80,http"], "'h' is not a digit"),
    (["install", "--ports", "0"], "port 0 is out of range 1-65535"),
    (["install", "--ports", "65536"], "port 65536 is out of range 1-65535"),
    (["install", "--ports", "80,80"], "port 80 is listed twice"),
    (["install", "--ports", ",".join(str(p) for p in range(1000, 1033))], "more than 32 ports"),
    (["install", "--ports", "80,"], "trailing comma"),
    (["install", "--alias", "169.254.169"], "not an IPv4 address in dotted-quad form"),
    (["install", "--alias", "fd00:ec2::254"], "not an IPv4 address"),
    (["install", "--alias", "224.0.0.1"], "multicast"),
    (["check", "--alias"], "option '--alias' needs a value"),
    (["remove", "--force"], "unknown option '--force'"),
])
def test_bad_arguments(tools, args, message):
    cp = tools.run("envd-guard", *args)
    assert cp.returncode == 2, cp.stderr
    assert message in cp.stderr
    assert cp.stderr.startswith("envd-guard: ")


def test_help(tools):
    cp = tools.run("envd-guard", "--help")
    assert cp.returncode == 0 and "install|check|remove" in cp.stdout


def test_needs_only_cap_net_admin(tools, guest):
    """What envd-guard.service grants (CapabilityBoundingSet=CAP_NET_ADMIN,
    NoNewPrivileges=yes) is enough for every command."""
    only = ("setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all,+net_admin",
            "--no-new-privs", "--")
    status = guest.guest.run(*only, "grep", "^CapEff", "/proc/self/status", check=True).stdout
    assert status.split()[1] == f"{1 << 12:016x}", status  # CAP_NET_ADMIN is bit 12, nothing else
    for command in ("install", "check", "remove"):
        cp = _in_ns(tools, guest.guest, command, prefix=only)
        assert cp.returncode == 0, f"{command}: {cp.stderr}"
    assert guest.nft("list", "ruleset").stdout == ""
