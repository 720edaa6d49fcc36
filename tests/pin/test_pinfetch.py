"""pinfetch against a real HTTP(S) server on loopback (tests/pin/pin_httpd.py),
in the release and the ASan+UBSan builds. After every failure the destination
is absent (or unchanged) and its directory holds no temporary file."""
import hashlib
import json
import os
import pathlib
import random
import shutil
import stat
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import pin_httpd as httpd  # noqa: E402
from harness import assert_no_sanitizer_report, read_pty  # noqa: E402

# Not a multiple of any buffer size. Seeded: the test ids carry its sha256,
# and pytest-xdist's workers must collect the same ids.
ARTIFACT = random.Random(51).randbytes(3 * 1024 * 1024 + 17)
SHA = hashlib.sha256(ARTIFACT).hexdigest()
OTHER = b"evil" + ARTIFACT[4:]
OTHER_SHA = hashlib.sha256(OTHER).hexdigest()


@pytest.fixture
def server():
    with httpd.Server() as s:
        s.routes["/envd"] = httpd.body(ARTIFACT)
        yield s


@pytest.fixture
def work(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    return tmp_path


def run(tools, *args, cwd=None, timeout=120):
    # A restrictive umask proves the output mode is explicit, not inherited.
    return tools.run("pinfetch", *args, cwd=cwd, timeout=timeout, preexec_fn=lambda: os.umask(0o077))


def fetch(tools, work, url, *extra, sha=SHA, dest=None):
    dest = dest or work / "out" / "envd"
    return run(tools, "--url", url, "--sha256", sha, "--output", dest, "--cache", work / "cache", *extra)


def assert_failed_cleanly(cp, work, dest_name="envd", before=None, code=1):
    """Exit code, one line on stderr, destination absent or untouched, no temp."""
    assert cp.returncode == code, (cp.returncode, cp.stderr)
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pinfetch: "), cp.stderr
    out = work / "out"
    left = sorted(os.listdir(out))
    if before is None:
        assert left == [], f"left behind in {out}: {left}"
    else:
        assert left == [dest_name], f"left behind in {out}: {left}"
        assert (out / dest_name).read_bytes() == before
    cache = work / "cache" / "sha256"
    if cache.is_dir():
        for name in os.listdir(cache):
            assert name == SHA and (cache / name).read_bytes() == ARTIFACT, f"bad cache entry {name}"
    return lines[0]


def assert_good(dest, mode=0o644):
    assert dest.read_bytes() == ARTIFACT
    assert stat.S_IMODE(dest.stat().st_mode) == mode
    assert sorted(os.listdir(dest.parent)) == [dest.name]


# -- good paths ------------------------------------------------------------

def test_good_fetch_by_url(tools, work, server):
    cp = fetch(tools, work, server.url("/envd"), "--size", len(ARTIFACT))
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""  # quiet when stderr is not a terminal
    assert_good(work / "out" / "envd")
    assert (work / "cache" / "sha256" / SHA).read_bytes() == ARTIFACT


def test_good_fetch_by_lock_with_mode(tools, work, server):
    lock = work / "envd.lock"
    lock.write_text(f"# test pin\n[envd]\nversion = 0.8.0\nurl = {server.url('/envd')}\n"
                    f"sha256 = {SHA}\nsize = {len(ARTIFACT)}   # known\n")
    dest = work / "out" / "envd"
    cp = run(tools, "--lock", lock, "--name", "envd", "--output", dest, "--cache", work / "cache",
             "--mode", "0755", "--verbose")
    assert cp.returncode == 0, cp.stderr
    assert_good(dest, 0o755)
    assert "verified" in cp.stderr


def test_replaces_existing_destination_on_success(tools, work, server):
    dest = work / "out" / "envd"
    dest.write_bytes(b"old")
    cp = fetch(tools, work, server.url("/envd"), "--no-cache")
    assert cp.returncode == 0, cp.stderr
    assert_good(dest)
    assert not (work / "cache").exists()


def test_follows_a_redirect(tools, work, server):
    server.routes["/latest"] = httpd.redirect("/envd", 301)
    cp = fetch(tools, work, server.url("/latest"))
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")


def test_localhost_counts_as_loopback(tools, work, server):
    cp = fetch(tools, work, server.url("/envd", host="localhost"), "--no-cache")
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")


# -- failures: each leaves nothing behind ----------------------------------

def test_wrong_hash_names_artifact_and_both_digests(tools, work, server):
    server.routes["/envd"] = httpd.body(OTHER)
    cp = fetch(tools, work, server.url("/envd"), "--name", "envd")
    line = assert_failed_cleanly(cp, work)
    assert line.startswith("pinfetch: envd: sha256 mismatch")
    assert SHA in line and OTHER_SHA in line and server.url("/envd") in line


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_wrong_hash_leaves_existing_destination_untouched(tools, work, server, cache):
    server.routes["/envd"] = httpd.body(OTHER)
    dest = work / "out" / "envd"
    dest.write_bytes(b"previous good copy")
    before = os.stat(dest)
    cp = fetch(tools, work, server.url("/envd"), *([] if cache else ["--no-cache"]))
    assert_failed_cleanly(cp, work, before=b"previous good copy")
    after = os.stat(dest)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_short_body_is_truncation(tools, work, server):
    server.routes["/envd"] = httpd.short(ARTIFACT[:100000], len(ARTIFACT))
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd")), work)
    assert "truncated" in line and str(len(ARTIFACT)) in line


def test_close_delimited_short_body_fails_the_hash(tools, work, server):
    server.routes["/envd"] = httpd.close_delimited(ARTIFACT[:100000])
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd")), work)
    assert "sha256 mismatch" in line


def test_close_delimited_short_body_fails_the_size(tools, work, server):
    server.routes["/envd"] = httpd.close_delimited(ARTIFACT[:100000])
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--size", len(ARTIFACT)), work)
    assert f"size mismatch: expected {len(ARTIFACT)} bytes, got 100000" in line


def test_http_404(tools, work, server):
    line = assert_failed_cleanly(fetch(tools, work, server.url("/missing")), work)
    assert "HTTP 404" in line and "/missing" in line


def test_http_500(tools, work, server):
    server.routes["/envd"] = httpd.status(500)
    assert "HTTP 500" in assert_failed_cleanly(fetch(tools, work, server.url("/envd")), work)


def test_redirect_loop(tools, work, server):
    server.routes["/loop"] = httpd.redirect("/loop")
    line = assert_failed_cleanly(fetch(tools, work, server.url("/loop")), work)
    assert "too many redirects" in line
    assert server.hits["/loop"] == 11  # the first request and ten redirects, then stop


def test_redirect_to_file_is_refused(tools, work, server):
    server.routes["/envd"] = httpd.redirect("file:///etc/passwd")
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd")), work)
    assert "redirect to file:///etc/passwd: redirect to file:// refused" in line


def test_stalled_server_times_out(tools, work, server):
    server.routes["/envd"] = httpd.stall()
    # run()'s subprocess timeout bounds it; the message says which limit hit.
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--timeout", "2"), work)
    assert "timed out" in line


def test_over_the_size_cap_announced(tools, work, server):
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--max-size", "1000000"), work)
    assert "size cap of 1000000 bytes" in line


def test_over_the_size_cap_unannounced(tools, work, server):
    server.routes["/envd"] = httpd.close_delimited(ARTIFACT)
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--max-size", "1000000"), work)
    assert "size cap of 1000000 bytes" in line


def test_larger_than_the_pinned_size(tools, work, server):
    server.routes["/envd"] = httpd.close_delimited(ARTIFACT + b"tail")
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--size", len(ARTIFACT)), work)
    assert f"more than the pinned {len(ARTIFACT)} bytes" in line


def test_announced_size_differs_from_pin(tools, work, server):
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--size", len(ARTIFACT) - 1), work)
    assert "size mismatch" in line


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_disk_full(tools, work, server, cache):
    """A 1 MiB tmpfs in a private mount namespace: the write fails with ENOSPC."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a private tmpfs")
    dest = work / "out" / "envd"
    cache_args = ["--cache", work / "out" / "cache"] if cache else ["--no-cache"]
    script = 'mount -t tmpfs -o size=1m tmpfs "$1" && shift && "$@"; rc=$?; ls -A "$OUT"; exit $rc'
    cp = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(work / "out"),
                         tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                         "--output", str(dest), *map(str, cache_args)],
                        capture_output=True, text=True, timeout=120, env={**os.environ, "OUT": str(work / "out")})
    assert_no_sanitizer_report(cp)
    assert cp.returncode == 1, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk full" in lines[0], cp.stderr
    # what the tmpfs held when pinfetch exited: nothing but the (empty) cache tree
    assert set(cp.stdout.split()) <= {"cache"}, cp.stdout
    if cache:
        assert "No space left" in lines[0]


def test_unwritable_destination_directory(tools, work, server):
    cp = fetch(tools, work, server.url("/envd"), dest=work / "out" / "missing-dir" / "envd")
    line = assert_failed_cleanly(cp, work)
    assert "cannot create a temporary file beside" in line
    assert server.hits["/envd"] == 0  # failed before downloading anything


# -- cache -----------------------------------------------------------------

def test_cache_hit_needs_no_server(tools, work, server):
    assert fetch(tools, work, server.url("/envd")).returncode == 0
    url = server.url("/envd")
    server.stop()
    dest2 = work / "out" / "envd2"
    cp = fetch(tools, work, url, "--verbose", dest=dest2)
    assert cp.returncode == 0, cp.stderr
    assert dest2.read_bytes() == ARTIFACT and "from the cache" in cp.stderr
    assert stat.S_IMODE(dest2.stat().st_mode) == 0o644


def test_corrupted_cache_entry_is_dropped_and_refetched(tools, work, server):
    assert fetch(tools, work, server.url("/envd")).returncode == 0
    entry = work / "cache" / "sha256" / SHA
    entry.write_bytes(OTHER)
    (work / "out" / "envd").unlink()
    cp = fetch(tools, work, server.url("/envd"))
    assert cp.returncode == 0, cp.stderr
    assert "corrupted" in cp.stderr and OTHER_SHA in cp.stderr
    assert_good(work / "out" / "envd")
    assert entry.read_bytes() == ARTIFACT
    assert server.hits["/envd"] == 2


def test_corrupted_cache_without_server_fails_cleanly(tools, work, server):
    url = server.url("/envd")
    server.stop()
    entry = work / "cache" / "sha256" / SHA
    entry.parent.mkdir(parents=True)
    entry.write_bytes(ARTIFACT[:-1])
    cp = fetch(tools, work, url)
    assert cp.returncode == 1
    assert not entry.exists()  # dropped, never handed out
    assert sorted(os.listdir(work / "out")) == []
    assert "corrupted" in cp.stderr


def test_concurrent_fetches_share_one_download(tools, work, server):
    server.routes["/envd"] = httpd.body(ARTIFACT, chunk_delay=0.005)  # slow enough to overlap
    procs = []
    for i in range(8):
        procs.append(subprocess.Popen(
            [tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
             "--output", str(work / "out" / f"envd{i}"), "--cache", str(work / "cache")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=120)
        cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        assert_no_sanitizer_report(cp)
        assert p.returncode == 0, err
    for i in range(8):
        assert (work / "out" / f"envd{i}").read_bytes() == ARTIFACT
    assert sorted(os.listdir(work / "out")) == sorted(f"envd{i}" for i in range(8))
    assert os.listdir(work / "cache" / "sha256") == [SHA]
    assert server.hits["/envd"] == 1  # the others waited on the entry's lock


def test_concurrent_fetches_into_one_destination(tools, work, server):
    dest = work / "out" / "envd"
    procs = [subprocess.Popen([tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                               "--output", str(dest), "--cache", str(work / "cache")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(8)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert_good(dest)


# -- mirrors and offline ---------------------------------------------------

def file_mirror(work, data=ARTIFACT):
    m = work / "mirror"
    (m / "sha256").mkdir(parents=True)
    (m / "sha256" / SHA).write_bytes(data)
    return m


def test_bad_mirror_then_good_mirror(tools, work, server):
    server.routes[f"/bad/sha256/{SHA}"] = httpd.body(OTHER)
    good = file_mirror(work)
    server.routes["/envd"] = httpd.status(500)  # the canonical URL must not be needed
    cp = fetch(tools, work, server.url("/envd"), "--mirror", server.url("/bad"),
               "--mirror", f"file://{good}/")
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")
    assert server.hits[f"/bad/sha256/{SHA}"] == 1 and server.hits["/envd"] == 0
    assert "sha256 mismatch" in cp.stderr and "trying the next source" in cp.stderr  # a tampered mirror is loud


def test_missing_mirror_falls_back_to_canonical(tools, work, server):
    cp = fetch(tools, work, server.url("/envd"), "--mirror", server.url("/nothing-here"), "--no-cache")
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    assert server.hits[f"/nothing-here/sha256/{SHA}"] == 1 and server.hits["/envd"] == 1


def test_a_cache_is_a_mirror(tools, work, server):
    assert fetch(tools, work, server.url("/envd")).returncode == 0
    server.routes["/envd"] = httpd.status(404)
    server.routes[f"/m/sha256/{SHA}"] = httpd.body((work / "cache" / "sha256" / SHA).read_bytes())
    cp = run(tools, "--url", server.url("/envd"), "--sha256", SHA, "--output", work / "out" / "b",
             "--no-cache", "--mirror", server.url("/m"))
    assert cp.returncode == 0, cp.stderr


def test_all_sources_fail(tools, work, server):
    server.routes["/envd"] = httpd.status(404)
    cp = fetch(tools, work, server.url("/envd"), "--mirror", server.url("/m1"), "--mirror", server.url("/m2"))
    line = assert_failed_cleanly(cp, work)
    assert "HTTP 404" in line and "earlier mirrors failed too" in line


def test_offline_uses_file_mirrors_only(tools, work, server):
    good = file_mirror(work)
    cp = fetch(tools, work, server.url("/envd"), "--offline", "--mirror", server.url("/m"),
               "--mirror", f"file://{good}")
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")
    assert sum(server.hits.values()) == 0


def test_offline_cache_hit(tools, work, server):
    assert fetch(tools, work, server.url("/envd")).returncode == 0
    cp = fetch(tools, work, server.url("/envd"), "--offline", dest=work / "out" / "again")
    assert cp.returncode == 0, cp.stderr
    assert server.hits["/envd"] == 1


def test_offline_miss_fails_without_network(tools, work, server):
    cp = fetch(tools, work, server.url("/envd"), "--offline", "--mirror", server.url("/m"))
    line = assert_failed_cleanly(cp, work)
    assert "offline" in line
    assert sum(server.hits.values()) == 0


def test_offline_bad_file_mirror(tools, work, server):
    bad = file_mirror(work, OTHER)
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--offline", "--mirror", f"file://{bad}"),
                                 work)
    assert "sha256 mismatch" in line


# -- transport policy ------------------------------------------------------

@pytest.fixture
def tls_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    cert, key = httpd.make_self_signed(d)
    with httpd.Server(certfile=str(cert), keyfile=str(key)) as s:
        s.routes["/envd"] = httpd.body(ARTIFACT)
        s.cert = cert
        yield s


def test_https_without_a_trusted_certificate_fails(tools, work, tls_server):
    line = assert_failed_cleanly(fetch(tools, work, tls_server.url("/envd")), work)
    assert "TLS" in line or "certificate" in line


def test_https_with_its_ca_file_works(tools, work, tls_server):
    cp = fetch(tools, work, tls_server.url("/envd"), "--ca-file", tls_server.cert)
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")


def test_https_redirect_to_http_is_refused(tools, work, tls_server, server):
    tls_server.routes["/down"] = httpd.redirect(server.url("/envd"))
    line = assert_failed_cleanly(fetch(tools, work, tls_server.url("/down"), "--ca-file", tls_server.cert,
                                       "--allow-http"), work)
    assert "redirect from https to plain http refused" in line
    assert server.hits["/envd"] == 0


@pytest.mark.parametrize("url", ["http://192.0.2.1/envd", "http://example.invalid/envd",
                                 "http://[::ffff:127.0.0.1]/envd", "http://127.0.0.1.example.invalid/x"])
def test_http_to_non_loopback_is_refused(tools, work, url):
    # Refused by policy before any connection: the message is the policy's
    # (a connection attempt would fail with a network error instead).
    line = assert_failed_cleanly(fetch(tools, work, url), work, code=2)
    assert "plain http" in line and "--allow-http" in line


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://127.0.0.1/x", "gopher://127.0.0.1/x"])
def test_other_schemes_are_refused_for_the_canonical_url(tools, work, url):
    line = assert_failed_cleanly(fetch(tools, work, url), work, code=2)
    assert "refused" in line or "not supported" in line or "only allowed" in line


def test_http_mirror_to_non_loopback_is_refused(tools, work, server):
    line = assert_failed_cleanly(fetch(tools, work, server.url("/envd"), "--mirror", "http://192.0.2.1/m"),
                                 work, code=2)
    assert "--mirror http://192.0.2.1/m" in line


# -- lock and usage errors (exit 2) ----------------------------------------

@pytest.mark.parametrize("text,needle", [
    ("[envd]\nversion = 0.8.0\nurl = https://e.org/x\nsha256 = " + SHA.upper() + "\n", ":4: [envd]: sha256 must be lowercase"),
    ("[envd]\nversion = 0.8.0\nurl = https://e.org/x\nsha256 = " + SHA[:-1] + "\n", ":4: [envd]: sha256 must be 64"),
    ("[envd]\nversion = 0.8.0\nurl = https://e.org/x\n", ":1: [envd]: missing \"sha256\""),
    ("[other]\nversion = 1\nurl = https://e.org/x\nsha256 = " + SHA + "\n", ": no [envd] stanza (it has: other)"),
])
def test_bad_lock_is_a_usage_error(tools, work, text, needle):
    lock = work / "bad.lock"
    lock.write_text(text)
    cp = run(tools, "--lock", lock, "--name", "envd", "--output", work / "out" / "envd", "--cache", work / "cache")
    assert cp.returncode == 2 and f"pinfetch: {lock}{needle}" in cp.stderr, cp.stderr
    assert os.listdir(work / "out") == []
    # Reading the lock for shell or Python fails the same way, printing nothing.
    for read in (["--json"], ["--field", "url"]):
        rd = run(tools, "--lock", lock, "--name", "envd", *read)
        assert rd.returncode == 2 and rd.stdout == "" and rd.stderr == cp.stderr, rd


# -- reading a lock: --json and --field -------------------------------------

GOOD_LOCK = ("# a comment\n[other]\nversion = 1\nurl = https://e.org/o\nsha256 = " + "0" * 64 + "\n\n"
             "[envd]   # the daemon\nversion = 0.8.0+build~1\nurl = https://e.org/v0.8.0/envd#frag\n"
             "sha256 = " + SHA + "\nsize = 3145745\n")


def test_json_prints_the_stanza(tools, work):
    lock = work / "good.lock"
    lock.write_text(GOOD_LOCK)
    cp = run(tools, "--lock", lock, "--name", "envd", "--json")
    assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    assert cp.stdout.count("\n") == 1
    assert json.loads(cp.stdout) == {"name": "envd", "version": "0.8.0+build~1",
                                     "url": "https://e.org/v0.8.0/envd#frag", "sha256": SHA, "size": 3145745}
    other = json.loads(run(tools, "--lock", lock, "--name", "other", "--json").stdout)
    assert other == {"name": "other", "version": "1", "url": "https://e.org/o", "sha256": "0" * 64}


@pytest.mark.parametrize("key,value", [("name", "envd"), ("version", "0.8.0+build~1"),
                                       ("url", "https://e.org/v0.8.0/envd#frag"), ("sha256", SHA),
                                       ("size", "3145745")])
def test_field_prints_one_value(tools, work, key, value):
    lock = work / "good.lock"
    lock.write_text(GOOD_LOCK)
    cp = run(tools, "--lock", lock, "--name", "envd", "--field", key)
    assert cp.returncode == 0 and cp.stdout == value + "\n" and cp.stderr == "", cp


@pytest.mark.parametrize("name,key,needle", [
    ("other", "size", ": [other] has no size (it is optional)"),
    ("envd", "bogus", ": --field bogus: unknown key (known: name, version, url, sha256, tree_sha256, size, commit)"),
    ("nope", "url", ": no [nope] stanza (it has: other, envd)"),
])
def test_field_errors_name_the_lock(tools, work, name, key, needle):
    lock = work / "good.lock"
    lock.write_text(GOOD_LOCK)
    cp = run(tools, "--lock", lock, "--name", name, "--field", key)
    assert cp.returncode == 2 and cp.stdout == "" and cp.stderr == f"pinfetch: {lock}{needle}\n", cp.stderr


@pytest.mark.parametrize("args", [
    ["--json"], ["--field", "url"], ["--lock", "x.lock", "--json"],
    ["--lock", "x.lock", "--name", "envd", "--json", "--field", "url"],
    ["--lock", "x.lock", "--name", "envd", "--json", "--output", "o"],
    ["--url", "https://e.org/x", "--sha256", SHA, "--output", "o", "--json"],
])
def test_json_and_field_usage(tools, work, args):
    cp = run(tools, *args, cwd=work)
    assert cp.returncode == 2 and cp.stdout == "" and len(cp.stderr.strip().splitlines()) == 1, cp


@pytest.mark.parametrize("args", [
    [], ["--url", "https://e.org/x"], ["--url", "https://e.org/x", "--sha256", SHA],
    ["--url", "https://e.org/x", "--sha256", "abc", "--output", "o"], ["--lock", "x", "--output", "o"],
    ["--print-pin", "https://e.org/x", "--output", "o"], ["--bogus"], ["--mode", "9", "--url", "u"],
    ["--timeout", "0"], ["--max-size", "-1"], ["--quiet", "--verbose", "--hash", "/dev/null"],
])
def test_usage_errors(tools, work, args):
    cp = run(tools, *args, cwd=work)
    assert cp.returncode == 2, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1


# -- print-pin, hash, progress ---------------------------------------------

def test_print_pin_round_trips_through_a_lock(tools, work, server):
    server.routes["/releases/v1.2.3/envd"] = httpd.body(ARTIFACT)
    cp = run(tools, "--print-pin", server.url("/releases/v1.2.3/envd"))
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == (f"[envd]\nversion = 1.2.3\nurl = {server.url('/releases/v1.2.3/envd')}\n"
                         f"sha256 = {SHA}\nsize = {len(ARTIFACT)}\n")
    lock = work / "new.lock"
    lock.write_text(cp.stdout)
    cp = run(tools, "--lock", lock, "--name", "envd", "--output", work / "out" / "envd", "--no-cache")
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")


def test_print_pin_needs_a_version(tools, work, server):
    cp = run(tools, "--print-pin", server.url("/envd"))
    assert cp.returncode == 2 and "--version" in cp.stderr and cp.stdout == ""
    cp = run(tools, "--print-pin", server.url("/envd"), "--version", "0.8.0", "--name", "my-envd")
    assert cp.returncode == 0 and cp.stdout.startswith("[my-envd]\nversion = 0.8.0\n"), cp.stderr


def test_print_pin_failure_prints_no_stanza(tools, work, server):
    cp = run(tools, "--print-pin", server.url("/v1.0.0/gone"))
    assert cp.returncode == 1 and cp.stdout == "" and "HTTP 404" in cp.stderr


def test_hash_matches_sha256sum(tools, work):
    f = work / "blob"
    f.write_bytes(ARTIFACT)
    cp = run(tools, "--hash", f)
    assert cp.returncode == 0 and cp.stdout == f"{SHA}  {f}\n"


@pytest.mark.parametrize("quiet", [False, True], ids=["tty", "tty-quiet"])
def test_progress_bar_only_on_a_tty(tools, work, server, quiet):
    import pty
    server.routes["/envd"] = httpd.body(ARTIFACT, chunk_delay=0.01)
    master, slave = pty.openpty()
    try:
        p = subprocess.Popen([tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                              "--output", str(work / "out" / "envd"), "--no-cache", *(["--quiet"] if quiet else [])],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        seen = read_pty(master)
        assert p.wait(timeout=60) == 0, seen
    finally:
        os.close(master)
    if quiet:
        assert seen == b"", seen
    else:
        assert b"\r" in seen and b"%" in seen and b"MiB" in seen, seen
    assert_good(work / "out" / "envd")


def shipped_pins():
    """(lock, name) for every artifact the image build pins: the LOCK NAME
    columns of os-image's pins lists (the base's and each flavor's), and the
    trees the javascript kernel's stage script fetches."""
    from harness import ROOT
    lists = sorted({p.resolve() for p in (ROOT / "os-image").rglob("pins") if p.is_file()})
    pins = []
    for lst in lists:
        for line in lst.read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lock, name = line.split()[:2]
                pins.append((ROOT / "recipes" / lock, name))
    # e2b-ci's javascript kernel: os-image/e2b-ci/ijavascript-stage.sh fetches these trees itself.
    pins += [(ROOT / "recipes" / "ijavascript.lock", n) for n in ("ijavascript", "nel", "ijavascript-babel")]
    return sorted(set(pins))


def test_every_shipped_lock_is_pinned_by_the_build():
    from harness import ROOT
    assert sorted(ROOT.glob("recipes/*.lock")) == sorted({lock for lock, _ in shipped_pins()})


def test_shipped_locks_parse(tools, work):
    """The stanzas the build uses parse, and pinfetch gets as far as the
    network (refused offline, with an empty cache), which it only does after
    parsing the lock; --json prints the same stanza, with every pin it has
    (sha256, tree_sha256 or both)."""
    pins = shipped_pins()
    assert pins, "no pins lists under os-image/"
    for lock, name in pins:
        assert "NOT PINNED" not in lock.read_text(), lock
        cp = run(tools, "--lock", lock, "--name", name, "--output", work / "out" / name,
                 "--cache", work / "cache", "--offline")
        js = run(tools, "--lock", lock, "--name", name, "--json")
        assert cp.returncode == 1 and "offline" in cp.stderr, (lock, name, cp.stderr)
        assert js.returncode == 0 and json.loads(js.stdout)["name"] == name, js
        assert {"sha256", "tree_sha256"} & set(json.loads(js.stdout)), js.stdout
    assert os.listdir(work / "out") == []


# -- without O_TMPFILE: named temporary files must not survive either ------

def _shim(tmp_path_factory, name):
    """tests/pin/NAME.c built as an LD_PRELOAD shim for this run."""
    so = tmp_path_factory.mktemp("shim") / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(so),
                    str(pathlib.Path(__file__).parent / f"{name}.c"), "-ldl"], check=True)
    return so


@pytest.fixture(scope="module")
def no_tmpfile(tmp_path_factory):
    """The environment of a file system without O_TMPFILE: the shim of
    tests/pin/no_o_tmpfile.c (the shipped binary has no switch for it)."""
    return {**os.environ, "LD_PRELOAD": str(_shim(tmp_path_factory, "no_o_tmpfile")),
            "ASAN_OPTIONS": "verify_asan_link_order=0"}


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_named_temp_good_fetch(tools, work, server, no_tmpfile, cache):
    cp = tools.run("pinfetch", "--url", server.url("/envd"), "--sha256", SHA, "--output", work / "out" / "envd",
                   *(["--cache", work / "cache"] if cache else ["--no-cache"]), env=no_tmpfile)
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")
    if cache:
        assert os.listdir(work / "cache" / "sha256") == [SHA]


@pytest.mark.parametrize("route", ["wrong-hash", "short", "404", "stall"])
def test_named_temp_failures_leave_nothing(tools, work, server, no_tmpfile, route):
    server.routes["/envd"] = {"wrong-hash": httpd.body(OTHER), "short": httpd.short(ARTIFACT[:5000], len(ARTIFACT)),
                              "404": httpd.status(404), "stall": httpd.stall()}[route]
    dest = work / "out" / "envd"
    dest.write_bytes(b"old")
    for cache in (["--cache", work / "cache"], ["--no-cache"]):
        cp = tools.run("pinfetch", "--url", server.url("/envd"), "--sha256", SHA, "--output", dest,
                       "--timeout", "1", *cache, env=no_tmpfile)
        assert_failed_cleanly(cp, work, before=b"old")
        if (work / "cache" / "sha256").is_dir():
            assert os.listdir(work / "cache" / "sha256") == []


@pytest.mark.parametrize("named", [False, True], ids=["o_tmpfile", "named-temp"])
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_signal_mid_download_leaves_nothing(tools, work, server, no_tmpfile, named, cache):
    server.routes["/envd"] = httpd.stall(first=ARTIFACT[:200000], announce=len(ARTIFACT))
    temp_dir = work / "cache" / "sha256" if cache else work / "out"
    p = subprocess.Popen([tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                          "--output", str(work / "out" / "envd"),
                          *(["--cache", str(work / "cache")] if cache else ["--no-cache"])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=no_tmpfile if named else os.environ)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.hits["/envd"] and (not named or any(n.startswith(".") for n in os.listdir(temp_dir)
                                                      if temp_dir.is_dir())):
            break
        time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("pinfetch never started the transfer")
    time.sleep(0.3)
    p.terminate()
    out, err = p.communicate(timeout=20)
    assert_no_sanitizer_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert p.returncode == 1 and "interrupted by signal 15" in err, err
    assert os.listdir(work / "out") == []
    if cache:
        assert os.listdir(work / "cache" / "sha256") == []


def _wait_for_temp(directory, proc, timeout=60):
    """The hidden temporary file pinfetch creates in DIRECTORY, once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        names = [n for n in os.listdir(directory) if ".pin-" in n] if directory.is_dir() else []
        if names:
            return directory / names[0]
        time.sleep(0.01)
    proc.kill()
    pytest.fail(f"no temporary file appeared in {directory}")


@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_named_temp_is_private_until_verified(tools, work, server, no_tmpfile, cache):
    """Unverified bytes are readable by the owner only: 0600 until the
    commit, the requested mode only on the file that is put in place."""
    server.routes["/envd"] = httpd.body(ARTIFACT, chunk_delay=0.04)
    temp_dir = work / "cache" / "sha256" if cache else work / "out"
    p = subprocess.Popen([tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                          "--output", str(work / "out" / "envd"), "--mode", "0644",
                          *(["--cache", str(work / "cache")] if cache else ["--no-cache"])],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_tmpfile)
    temp = _wait_for_temp(temp_dir, p)
    mode = stat.S_IMODE(temp.stat().st_mode)
    out, err = p.communicate(timeout=120)
    assert_no_sanitizer_report(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert mode == 0o600, f"{temp.name} had mode {mode:o} before verification"
    assert p.returncode == 0, err
    assert_good(work / "out" / "envd", mode=0o644)


def test_named_temp_replaced_midway_is_not_put_in_place(tools, work, server, no_tmpfile):
    """rename(2) moves a name: if another file took the temporary name while
    the download ran, it is not the verified file, and it must not land at
    the destination."""
    server.routes["/envd"] = httpd.body(ARTIFACT, chunk_delay=0.04)
    p = subprocess.Popen([tools.path("pinfetch"), "--url", server.url("/envd"), "--sha256", SHA,
                          "--output", str(work / "out" / "envd"), "--no-cache"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_tmpfile)
    temp = _wait_for_temp(work / "out", p)
    impostor = work / "impostor"
    impostor.write_bytes(b"not the verified artifact")
    os.rename(impostor, temp)
    out, err = p.communicate(timeout=120)
    cp = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    assert_no_sanitizer_report(cp)
    line = assert_failed_cleanly(cp, work)
    assert "cannot put" in line and "replaced" in line, line


@pytest.fixture(scope="module")
def fsync_dir_fails(tmp_path_factory):
    """The LD_PRELOAD shim of tests/pin/fsync_dir_fails.c, built for this run."""
    return _shim(tmp_path_factory, "fsync_dir_fails")


@pytest.mark.parametrize("named", [False, True], ids=["o_tmpfile", "named-temp"])
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_directory_fsync_failure_after_the_rename_is_reported_truthfully(tools, work, server, fsync_dir_fails,
                                                                         no_tmpfile,
                                                                         named, cache):
    """Once renamed, the verified file IS in place: a failing fsync of its
    directory is a warning that names the directory's file and says so, not
    a failure of a file that is there."""
    preload = [no_tmpfile["LD_PRELOAD"]] if named else []
    env = {**os.environ, "LD_PRELOAD": " ".join(preload + [str(fsync_dir_fails)]),
           "ASAN_OPTIONS": "verify_asan_link_order=0"}
    cp = tools.run("pinfetch", "--url", server.url("/envd"), "--sha256", SHA, "--output", work / "out" / "envd",
                   *(["--cache", work / "cache"] if cache else ["--no-cache"]), env=env)
    assert cp.returncode == 0, cp.stderr
    assert_good(work / "out" / "envd")
    assert "in place and verified" in cp.stderr and "syncing its directory failed" in cp.stderr, cp.stderr
    assert str(work / "out" / "envd") in cp.stderr, cp.stderr


def test_destination_that_is_a_directory(tools, work, server):
    (work / "out" / "envd").mkdir()
    cp = fetch(tools, work, server.url("/envd"))
    assert cp.returncode == 1 and "Is a directory" in cp.stderr, cp.stderr
    assert server.hits["/envd"] == 0 and os.listdir(work / "out" / "envd") == []
