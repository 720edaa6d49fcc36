"""Real clients against mmds-serve: a Go net/http program doing envd's
exact flow, and botocore's IMDSv2 fetcher (a real AWS client)."""
import hashlib
import json
import os
import subprocess
import threading

import pytest

from harness import BUILD, ROOT
from mmds_fixtures import curl, mmds, netns  # noqa: F401  (fixtures)
from mmds_helpers import MMDS_IP

ACCESS_TOKEN = "e2b-access-token-for-tests"
ENVD_DOC = {
    "instanceID": "isb7x9k2m4",
    "envID": "base-template",
    "address": "http://10.0.0.1:30006",
    "accessTokenHash": hashlib.sha512(ACCESS_TOKEN.encode()).hexdigest(),
    "unrelated": {"ignored": True},
}


@pytest.fixture(scope="session")
def envdclient(tmp_path_factory):
    """Builds tests/mmds/envdclient with Debian's Go (stdlib only)."""
    out = tmp_path_factory.mktemp("go") / "envdclient"
    env = dict(os.environ, GOCACHE=str(BUILD / "go-cache"), GOPATH=str(BUILD / "go-path"),
               CGO_ENABLED="0", GOFLAGS="", GO111MODULE="on", GOPROXY="off")
    cp = subprocess.run(["go", "build", "-o", str(out), "."], cwd=ROOT / "tests" / "mmds" / "envdclient",
                        env=env, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return out


def run_envdclient(netns, binary, deadline="10s", flow="poll"):
    cp = netns.run(binary, "-deadline", deadline, "-flow", flow, timeout=60)
    return cp.returncode, json.loads(cp.stdout)


def test_envd_flow_go_net_http(mmds, netns, envdclient):
    mmds(document=ENVD_DOC)
    rc, res = run_envdclient(netns, envdclient)
    assert rc == 0, res
    assert res["attempts"] == 1
    assert (res["instanceID"], res["envID"], res["address"]) == ("isb7x9k2m4", "base-template",
                                                                   "http://10.0.0.1:30006")
    # What envd's /init check does with it: sha512 hex of the raw token.
    assert res["accessTokenHash"] == hashlib.sha512(ACCESS_TOKEN.encode()).hexdigest()


def test_envd_init_hash_check_flow(mmds, netns, envdclient):
    """envd's /init reads accessTokenHash with its other client: keep-alives
    off, one attempt."""
    mmds(document=ENVD_DOC)
    rc, res = run_envdclient(netns, envdclient, flow="init")
    assert rc == 0 and res["attempts"] == 1, res
    assert res["accessTokenHash"] == hashlib.sha512(ACCESS_TOKEN.encode()).hexdigest()


def test_envd_keeps_polling_until_the_document_arrives(mmds, netns, envdclient):
    """The default before-document answer is a non-JSON 503, so a booting
    envd polls at 20 Hz and gets the real ids once they are written."""
    s = mmds()
    writer = threading.Timer(0.6, s.write_document, args=(ENVD_DOC,))
    writer.start()
    try:
        rc, res = run_envdclient(netns, envdclient)
    finally:
        writer.join()
    assert rc == 0, res
    assert res["attempts"] > 3  # it had to poll
    assert res["instanceID"] == "isb7x9k2m4" and res["envID"] == "base-template"


def test_envd_stops_at_empty_object_option(mmds, netns, envdclient):
    """With --empty-document=object, envd parses {} and stops with empty ids:
    the trade-off the default avoids."""
    mmds("--empty-document=object")
    rc, res = run_envdclient(netns, envdclient)
    assert rc == 0 and res["attempts"] == 1
    assert res["instanceID"] == "" and res["accessTokenHash"] == ""


def ec2_document(role, creds):
    return {
        "latest": {
            "meta-data": {
                "instance-id": "i-0123456789abcdef0",
                "iam": {
                    "info": json.dumps({"Code": "Success", "InstanceProfileArn": "arn:aws:iam::1:instance-profile/x"}),
                    # EC2 serves each role's credentials as a JSON text.
                    "security-credentials": {role: json.dumps(creds)},
                },
            },
        },
    }


def test_botocore_imdsv2_role_credentials(mmds, netns):
    from botocore.utils import InstanceMetadataFetcher

    creds = {
        "Code": "Success",
        "LastUpdated": "2026-01-01T00:00:00Z",
        "Type": "AWS-HMAC",
        "AccessKeyId": "ASIAEXAMPLEKEY",
        "SecretAccessKey": "secret/example+key",
        "Token": "session-token-example",
        "Expiration": "2099-01-01T00:00:00Z",
    }
    mmds(document=ec2_document("e2b-role", creds))
    with netns.entered():
        fetcher = InstanceMetadataFetcher(timeout=5, num_attempts=1, base_url=f"http://{MMDS_IP}/")
        got = fetcher.retrieve_iam_role_credentials()
    assert got == {
        "role_name": "e2b-role",
        "access_key": "ASIAEXAMPLEKEY",
        "secret_key": "secret/example+key",
        "token": "session-token-example",
        "expiry_time": "2099-01-01T00:00:00Z",
    }


def test_botocore_v2_token_is_required(mmds, netns, curl):
    """botocore sends x-aws-ec2-metadata-token-ttl-seconds: 21600; without a
    token header a GET is refused in V2."""
    mmds(document=ec2_document("r", {"AccessKeyId": "a"}))
    assert curl("/latest/meta-data/iam/security-credentials/").status == 401
    from botocore.utils import InstanceMetadataFetcher
    with netns.entered():
        fetcher = InstanceMetadataFetcher(timeout=5, num_attempts=1, base_url=f"http://{MMDS_IP}/")
        token = fetcher._fetch_metadata_token()
    assert token and curl("/latest/meta-data/iam/security-credentials/", token=token).body == "r"
