"""os-image/e2b-ci/java-cacerts.py: the Java trust store that
ca-certificates-java writes (JKS, dated at install time) becomes the same bytes
in every build, and Java still reads it and trusts through it. Real keystores
made by the host JDK's keytool, read back by keytool and by a Java program."""
import importlib.util
import io
import os
import random
import shutil
import struct
import time
from contextlib import redirect_stderr

import pytest

from ci_helpers import FLAVOR_DIR, ROOT, run

TOOL = FLAVOR_DIR / "java-cacerts.py"
EPOCH = 1700000000  # 2023-11-14 22:13:20 UTC
PASS = "changeit"

pytestmark = pytest.mark.skipif(not (shutil.which("keytool") and shutil.which("java")),
                                reason="needs a JDK's keytool and java on PATH")

# Trust a server certificate the way TLS does: the default TrustManagerFactory,
# reading the store named by javax.net.ssl.trustStore with the default type
# (PKCS12 since Java 9; keystore.type.compat lets it read JKS, as Debian's JDK
# reads /etc/ssl/certs/java/cacerts).
TRUST_CHECK = """
import java.io.FileInputStream;
import java.security.KeyStore;
import java.security.cert.*;
import javax.net.ssl.*;
public class TrustCheck {
    public static void main(String[] a) throws Exception {
        X509Certificate c = (X509Certificate) CertificateFactory.getInstance("X.509")
            .generateCertificate(new FileInputStream(a[0]));
        TrustManagerFactory f = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        f.init((KeyStore) null);
        X509TrustManager tm = (X509TrustManager) f.getTrustManagers()[0];
        try {
            tm.checkServerTrusted(new X509Certificate[] {c}, "RSA");
            System.out.println("trusted");
        } catch (CertificateException e) {
            System.out.println("untrusted: " + e.getMessage());
        }
    }
}
"""


def keytool(*args, cwd):
    cp = run(["keytool", *args, "-J-Duser.timezone=UTC", "-J-Duser.language=en", "-J-Duser.country=US"],
             cwd=cwd)
    assert cp.returncode == 0, (args, cp.stdout, cp.stderr)
    return cp.stdout


def normalise(path, epoch=EPOCH, *extra):
    return run(["/usr/bin/python3", TOOL, *extra, path],
               env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Two CAs (PEM) and a server certificate signed by the second."""
    d = tmp_path_factory.mktemp("pki")
    for ca in ("ca1", "ca2"):
        keytool("-genkeypair", "-keystore", f"{ca}.p12", "-storepass", PASS, "-alias", ca, "-keyalg", "RSA",
                "-keysize", "2048", "-dname", f"CN=Test {ca}", "-ext", "bc:c", "-validity", "30", cwd=d)
        keytool("-exportcert", "-rfc", "-keystore", f"{ca}.p12", "-storepass", PASS, "-alias", ca,
                "-file", f"{ca}.pem", cwd=d)
    keytool("-genkeypair", "-keystore", "srv.p12", "-storepass", PASS, "-alias", "srv", "-keyalg", "RSA",
            "-keysize", "2048", "-dname", "CN=localhost", "-validity", "30", cwd=d)
    keytool("-certreq", "-keystore", "srv.p12", "-storepass", PASS, "-alias", "srv", "-file", "srv.csr", cwd=d)
    keytool("-gencert", "-rfc", "-keystore", "ca2.p12", "-storepass", PASS, "-alias", "ca2",
            "-infile", "srv.csr", "-outfile", "srv.pem", "-ext", "san=dns:localhost", "-validity", "30", cwd=d)
    return d


def trust_store(pki, name):
    """A JKS store as ca-certificates-java makes it: one CA, a second later."""
    path = pki / name
    for i, ca in enumerate(("ca1", "ca2")):
        if i:
            time.sleep(1.1)
        keytool("-importcert", "-noprompt", "-storetype", "JKS", "-keystore", name, "-storepass", PASS,
                "-alias", f"debian:{ca}.pem", "-file", f"{ca}.pem", cwd=pki)
    return path


@pytest.fixture(scope="module")
def stores(pki):
    a = trust_store(pki, "a.jks")
    time.sleep(1.1)
    b = trust_store(pki, "b.jks")
    return a, b


def trusts(pki, store):
    cp = run(["java", f"-Djavax.net.ssl.trustStore={store}", f"-Djavax.net.ssl.trustStorePassword={PASS}",
              pki / "TrustCheck.java", pki / "srv.pem"], cwd=pki)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.strip()


def test_two_builds_become_identical_and_java_still_trusts(pki, stores, tmp_path):
    a, b = stores
    assert a.read_bytes()[:4] == b"\xfe\xed\xfe\xed"
    assert a.read_bytes() != b.read_bytes(), "the two stores should differ by their dates before"
    copies = []
    for src in (a, b):
        dst = tmp_path / src.name
        shutil.copy(src, dst)
        os.chmod(dst, 0o644)
        cp = normalise(dst)
        assert cp.returncode == 0, cp.stderr
        assert "2 entries" in cp.stderr
        assert (os.stat(dst).st_mode & 0o777) == 0o644 and os.stat(dst).st_mtime == EPOCH
        copies.append(dst.read_bytes())
    assert copies[0] == copies[1]
    # Idempotent: a second pass changes nothing.
    assert normalise(tmp_path / "a.jks").returncode == 0
    assert (tmp_path / "a.jks").read_bytes() == copies[0]
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".")], "a temporary file was left behind"

    listing = keytool("-list", "-keystore", tmp_path / "a.jks", "-storepass", PASS, cwd=tmp_path)
    assert "contains 2 entries" in listing, listing
    for ca in ("ca1", "ca2"):
        assert f"debian:{ca}.pem, Nov 14, 2023, trustedCertEntry," in listing, listing

    (pki / "TrustCheck.java").write_text(TRUST_CHECK)
    assert trusts(pki, tmp_path / "a.jks") == "trusted"
    # The check can fail: a store without the server's CA does not trust it.
    only_ca1 = tmp_path / "only-ca1.jks"
    shutil.copy(tmp_path / "a.jks", only_ca1)
    keytool("-delete", "-keystore", only_ca1, "-storepass", PASS, "-alias", "debian:ca2.pem", cwd=tmp_path)
    assert trusts(pki, only_ca1).startswith("untrusted")


def test_refuses_without_source_date_epoch_and_leaves_file(stores, tmp_path):
    dst = tmp_path / "c.jks"
    shutil.copy(stores[0], dst)
    before = dst.read_bytes()
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    cp = run(["/usr/bin/python3", TOOL, dst], env=env)
    assert cp.returncode == 1 and "SOURCE_DATE_EPOCH" in cp.stderr, cp.stderr
    assert normalise(dst, "yesterday").returncode == 1
    assert dst.read_bytes() == before


def test_refuses_symlink_and_non_regular(stores, tmp_path):
    real = tmp_path / "real.jks"
    shutil.copy(stores[0], real)
    link = tmp_path / "cacerts"
    link.symlink_to(real)
    cp = normalise(link)
    assert cp.returncode == 1 and f"{link}: a symbolic link, not followed" in cp.stderr, cp.stderr
    assert real.read_bytes() == stores[0].read_bytes()
    cp = normalise(tmp_path)
    assert cp.returncode == 1, cp.stderr
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cp = normalise(fifo)
    assert cp.returncode == 1 and "not a regular file" in cp.stderr, cp.stderr


def test_root_resolves_links_inside_the_root(stores, tmp_path):
    """--root: /etc/ssl/certs/java as a link to / means the guest's /, never the host's."""
    root = tmp_path / "root"
    (root / "etc/ssl/certs").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(stores[0], outside / "cacerts")
    (root / "etc/ssl/certs/java").symlink_to(outside)  # absolute: the guest's /tmp/..., not ours
    cp = normalise("/etc/ssl/certs/java/cacerts", EPOCH, "--root", root)
    assert cp.returncode == 1, cp.stderr
    assert (outside / "cacerts").read_bytes() == stores[0].read_bytes()
    (root / "etc/ssl/certs/java").unlink()
    (root / "etc/ssl/certs/java").mkdir()
    shutil.copy(stores[0], root / "etc/ssl/certs/java/cacerts")
    cp = normalise("/etc/ssl/certs/java/cacerts", EPOCH, "--root", root)
    assert cp.returncode == 0, cp.stderr
    assert f"{root}/etc/ssl/certs/java/cacerts: 2 entries" in cp.stderr


def load_tool():
    spec = importlib.util.spec_from_file_location("java_cacerts", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("data,message", [
    (b"", "offset 0: truncated: magic"),
    (b"\x30\x82\x01\x00" + b"\0" * 40, "not a JKS keystore's 0xfeedfeed (PKCS12?"),
    (struct.pack(">III", 0xFEEDFEED, 1, 0), "offset 4: JKS version 1"),
    (struct.pack(">IIII", 0xFEEDFEED, 2, 1, 3), "offset 12: entry 0: unknown tag 3"),
    (struct.pack(">III", 0xFEEDFEED, 2, 0) + b"\0" * 20, "integrity digest does not match"),
])
def test_refuses_malformed_with_offset(data, message, tmp_path):
    f = tmp_path / "bad.jks"
    f.write_bytes(data)
    cp = normalise(f)
    assert cp.returncode == 1 and f"java-cacerts: {f}: " in cp.stderr and message in cp.stderr, cp.stderr
    assert "Traceback" not in cp.stderr
    assert f.read_bytes() == data


def test_fuzz_truncations_and_bit_flips_give_clean_errors(stores, tmp_path, monkeypatch):
    """Every byte is under the digest, so any damage must be refused, with a
    message, never a traceback (in-process: a few hundred cases in seconds)."""
    tool = load_tool()
    good = tmp_path / "good.jks"
    shutil.copy(stores[0], good)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", str(EPOCH))
    assert tool.main([str(good)]) == 0
    data = good.read_bytes()
    rng = random.Random(36)
    cases = [data[:n] for n in rng.sample(range(len(data)), 150)]
    for _ in range(250):
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            i = rng.randrange(len(b))
            b[i] ^= 1 << rng.randrange(8)
        cases.append(bytes(b))
    cases.append(data + b"\0")
    f = tmp_path / "case.jks"
    for case in cases:
        f.write_bytes(case)
        err = io.StringIO()
        with redirect_stderr(err):
            rc = tool.main([str(f)])
        assert rc == 1, (len(case), err.getvalue())
        assert err.getvalue().startswith(f"java-cacerts: {f}: "), err.getvalue()
        assert f.read_bytes() == case
