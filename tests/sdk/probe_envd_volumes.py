"""Test only: envd's E2B volumes, the feature nfs-common backs. The pool's
`POST /init` with volumeMounts (as E2B's orchestrator sends it) through
e2b-hostlink forward into the real envd, which runs `findmnt`, `mkdir -p`
and `mount -v -t nfs -o fg,hard,…,nfsvers=3,… TARGET PATH` in the guest.
Nothing serves NFS here (and this machine's kernel has no NFS client), so
the mount fails; what it says shows which program ran it. Standard library
only (not an SDK call: the SDKs never send /init). One line: CASE
envd_volume_mount <json>. Env: E2B_SDK_TOKEN (sha512 in MMDS)."""
import json
import os
import urllib.error
import urllib.request

ENVD = "http://localhost:49983"
body = {"accessToken": os.environ["E2B_SDK_TOKEN"],
        "volumeMounts": [{"nfs_target": "127.0.0.1:/e2b-volume", "path": "/mnt/e2b-volume"}]}
req = urllib.request.Request(f"{ENVD}/init", data=json.dumps(body).encode(), method="POST",
                             headers={"content-type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=60) as r:
        obs = {"status": r.status, "body": r.read().decode(errors="replace")}
except urllib.error.HTTPError as e:
    obs = {"status": e.code, "body": e.read().decode(errors="replace")}
print(f"CASE envd_volume_mount {json.dumps(obs)}", flush=True)
