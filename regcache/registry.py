"""The shared cache's client of an OCI registry (regcache/README.md): the
distribution API over HTTPS, with containers' own credentials and CAs.

Credentials come from the auth file containers' tools read (REGISTRY_AUTH_FILE,
else $XDG_RUNTIME_DIR/containers/auth.json, else
~/.config/containers/auth.json, else ~/.docker/config.json), the most
specific of its `auths` keys (host/repository before host), or the
credential helper it names for the host (credHelpers, credsStore). CAs: the
system's, with those of certs.d for the host (/etc/containers/certs.d,
/etc/docker/certs.d) or of cert_dir=. TLS is always verified; plain HTTP is
never spoken.

Every failure is one of three: Miss (the registry has no such tag),
Unavailable (unreachable, refusing, or answering out of turn: the build goes
on without the registry) and Refused (regcache/entry.py: an entry that does
not verify).
"""
import base64
import glob
import hashlib
import http.client
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT = 30
MANIFEST_MAX = 4 << 20
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
REPO_PART = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*"
                  r"(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](?::[0-9]{1,5})?")
TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


class Miss(Exception):
    pass


class Unavailable(Exception):
    pass


class Refused(Exception):
    pass


def parse_ref(value: str) -> tuple:
    """cache_registry=REGISTRY/REPO as (host, repository); ValueError names what is wrong."""
    if "://" in value:
        raise ValueError(f"cache_registry={value}: give REGISTRY/REPO without a scheme (HTTPS is always used)")
    host, _, repo = value.partition("/")
    if not repo or not HOST.fullmatch(host) or ("." not in host and ":" not in host and host != "localhost"):
        raise ValueError(f"cache_registry={value}: not REGISTRY/REPO (a registry host such as "
                         "registry.example:5000, then a repository path such as team/e2b-cache)")
    if not all(REPO_PART.fullmatch(p) for p in repo.split("/")):
        raise ValueError(f"cache_registry={value}: repository '{repo}' is not a valid repository name "
                         "(lower-case letters, digits and . _ - between them, parts separated by /)")
    return host, repo


def auth_files() -> list:
    env = os.environ.get("REGISTRY_AUTH_FILE")
    if env:
        return [env]
    out = []
    if os.environ.get("XDG_RUNTIME_DIR"):
        out.append(os.path.join(os.environ["XDG_RUNTIME_DIR"], "containers", "auth.json"))
    home = os.path.expanduser("~")
    out += [os.path.join(home, ".config", "containers", "auth.json"), os.path.join(home, ".docker", "config.json")]
    return out


def credentials(host: str, repo: str) -> tuple | None:
    """(user, secret) for host/repo from the first auth file that has them
    (containers' order), or None."""
    for path in auth_files():
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as e:
            raise Unavailable(f"auth file {path}: unreadable ({e})") from None
        auths = doc.get("auths") or {}
        parts = repo.split("/")
        keys = [f"{host}/{'/'.join(parts[:n])}" for n in range(len(parts), 0, -1)]
        keys += [host, f"https://{host}", f"http://{host}", f"https://{host}/v1/", f"https://{host}/v2/"]
        for k in keys:
            entry = auths.get(k)
            if isinstance(entry, dict) and entry.get("auth"):
                try:
                    user, _, secret = base64.b64decode(entry["auth"]).decode().partition(":")
                except (ValueError, UnicodeDecodeError):
                    raise Unavailable(f"auth file {path}: the entry for {k} is not base64 of user:password") from None
                return user, secret
        helper = (doc.get("credHelpers") or {}).get(host) or doc.get("credsStore")
        if helper:
            return helper_credentials(helper, host, path)
    return None


def helper_credentials(helper: str, host: str, path: str) -> tuple | None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", helper):
        raise Unavailable(f"auth file {path}: credential helper '{helper}' is not a helper's name")
    try:
        cp = subprocess.run([f"docker-credential-{helper}", "get"], input=host, capture_output=True, text=True,
                            timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Unavailable(f"credential helper docker-credential-{helper} (from {path}): {e}") from None
    if cp.returncode != 0:
        return None   # the helper has nothing for this host
    try:
        d = json.loads(cp.stdout)
        return d["Username"], d["Secret"]
    except (ValueError, KeyError, TypeError):
        raise Unavailable(f"credential helper docker-credential-{helper}: an answer that is not its JSON") from None


def tls_context(host: str, cert_dir: str | None) -> ssl.SSLContext:
    """The system's CAs, and the host's certs.d (or cert_dir's) CAs and client certificate."""
    ctx = ssl.create_default_context()
    dirs = [cert_dir] if cert_dir else [f"/etc/containers/certs.d/{host}", f"/etc/docker/certs.d/{host}"]
    for d in dirs:
        try:
            for ca in sorted(glob.glob(os.path.join(d, "*.crt"))):
                ctx.load_verify_locations(cafile=ca)
            for cert in sorted(glob.glob(os.path.join(d, "*.cert"))):
                ctx.load_cert_chain(cert, cert[:-len(".cert")] + ".key")
        except (OSError, ssl.SSLError) as e:
            raise Unavailable(f"certificates in {d}: {e}") from None
    return ctx


def is_loopback(host: str) -> bool:
    """HOST[:PORT] or [V6][:PORT] names this machine's loopback."""
    name = host[1:host.index("]")] if host.startswith("[") else host.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def basic(creds: tuple) -> str:
    return "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode()


class NoRedirectForWrites(urllib.request.HTTPRedirectHandler):
    """Redirects are followed for reads (a registry may serve blobs from a
    store of its own), and never carry the registry's Authorization."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        if req.get_method() not in ("GET", "HEAD"):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class Registry:
    """One repository of one registry: REGISTRY/REPO."""

    def __init__(self, ref: str, cert_dir: str | None = None):
        self.ref = ref
        self.host, self.repo = parse_ref(ref)
        self.base = f"https://{self.host}/v2/{self.repo}"
        handlers = [urllib.request.HTTPSHandler(context=tls_context(self.host, cert_dir)), NoRedirectForWrites()]
        if is_loopback(self.host):
            handlers.append(urllib.request.ProxyHandler({}))
        self.opener = urllib.request.build_opener(*handlers)
        self.auth = None       # the Authorization header that worked
        self._creds = False    # not looked up yet

    # -- HTTP, with the registry's challenge answered once ------------------
    def request(self, method: str, url: str, data=None, headers: dict | None = None, ok=(200,)):
        """The response (open, for the caller to read and close) when its
        status is in OK; Miss on 404; Unavailable otherwise."""
        for attempt in range(2):
            req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
            if self.auth:
                req.add_unredirected_header("Authorization", self.auth)
            try:
                resp = self.opener.open(req, timeout=TIMEOUT)
            except urllib.error.HTTPError as e:
                resp = e
            except (urllib.error.URLError, OSError, http.client.HTTPException, socket.timeout) as e:
                reason = getattr(e, "reason", e)
                raise Unavailable(f"unreachable ({reason})") from None
            if resp.status in ok:
                return resp
            body = resp.read(4096)
            resp.close()
            if resp.status == 401 and attempt == 0:
                self.answer(resp.headers.get("WWW-Authenticate", ""))
                if hasattr(data, "seek"):
                    data.seek(0)
                continue
            if resp.status == 404:
                raise Miss(self.error_text(body) or "not found")
            what = {401: "refused the credentials", 403: "refused access"}.get(resp.status, "answered")
            raise Unavailable(f"{what} (HTTP {resp.status} for {method} {urllib.parse.urlsplit(url).path}"
                              f"{': ' + self.error_text(body) if self.error_text(body) else ''})")
        raise AssertionError("unreachable")

    @staticmethod
    def error_text(body: bytes) -> str:
        try:
            errs = json.loads(body).get("errors") or []
            return "; ".join(f"{e.get('code', '')} {e.get('message', '')}".strip() for e in errs)[:300]
        except (ValueError, AttributeError):
            return ""

    def creds(self):
        if self._creds is False:
            self._creds = credentials(self.host, self.repo)
        return self._creds

    def answer(self, challenge: str) -> None:
        scheme, _, params = challenge.partition(" ")
        creds = self.creds()
        if scheme.lower() == "basic":
            if not creds:
                raise Unavailable("asks for credentials, and the auth file has none for it "
                                  f"({' or '.join(auth_files())}; `skopeo login {self.host}` writes one)")
            self.auth = basic(creds)
            return
        if scheme.lower() != "bearer":
            raise Unavailable(f"asks for authentication of a kind this client does not speak ({scheme or 'none'})")
        p = dict(re.findall(r'(\w+)="([^"]*)"', params))
        if not p.get("realm", "").startswith("https://"):
            raise Unavailable(f"its token service is not HTTPS ({p.get('realm', 'none')})")
        query = {"service": p.get("service", "")}
        query["scope"] = p.get("scope") or f"repository:{self.repo}:pull,push"
        req = urllib.request.Request(p["realm"] + "?" + urllib.parse.urlencode(query))
        if creds:
            req.add_unredirected_header("Authorization", basic(creds))
        try:
            with self.opener.open(req, timeout=TIMEOUT) as r:
                tok = json.loads(r.read(1 << 20))
            self.auth = "Bearer " + (tok.get("token") or tok["access_token"])
        except urllib.error.HTTPError as e:
            raise Unavailable(f"its token service refused the credentials (HTTP {e.code})") from None
        except (urllib.error.URLError, OSError, ValueError, KeyError, http.client.HTTPException) as e:
            raise Unavailable(f"its token service failed ({getattr(e, 'reason', e)})") from None

    # -- the distribution API ------------------------------------------------
    def get_manifest(self, ref: str) -> bytes:
        with self.request("GET", f"{self.base}/manifests/{ref}", headers={"Accept": MEDIA_MANIFEST}) as r:
            body = r.read(MANIFEST_MAX + 1)
        if len(body) > MANIFEST_MAX:
            raise Refused(f"manifest {ref}: larger than {MANIFEST_MAX >> 20} MiB")
        return body

    def has_manifest(self, ref: str) -> bool:
        try:
            self.request("HEAD", f"{self.base}/manifests/{ref}", headers={"Accept": MEDIA_MANIFEST}).close()
            return True
        except Miss:
            return False

    def get_blob(self, digest: str, size: int, dest) -> None:
        """Blob DIGEST (SIZE bytes) written to the open file DEST; Refused
        when the bytes are not those."""
        h = hashlib.sha256()
        got = 0
        with self.request("GET", f"{self.base}/blobs/{digest}") as r:
            while chunk := r.read(1 << 20):
                got += len(chunk)
                if got > size:
                    raise Refused(f"blob {digest}: more than the {size} bytes the manifest gives")
                h.update(chunk)
                dest.write(chunk)
        if got != size or "sha256:" + h.hexdigest() != digest:
            raise Refused(f"blob {digest}: the registry served other bytes ({got} bytes, sha256:{h.hexdigest()})")

    def put_blob(self, digest: str, size: int, path: str | None = None, data: bytes | None = None) -> None:
        try:
            self.request("HEAD", f"{self.base}/blobs/{digest}").close()
            return   # already there
        except Miss:
            pass
        with self.request("POST", f"{self.base}/blobs/uploads/", data=b"", ok=(202,)) as r:
            loc = r.headers.get("Location") or ""
        if not loc:
            raise Unavailable("answered an upload without a Location")
        url = urllib.parse.urljoin(f"https://{self.host}/", loc)
        url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"digest": digest})
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        if path is not None:
            with open(path, "rb") as f:
                self.request("PUT", url, data=f, headers=headers, ok=(201,)).close()
        else:
            self.request("PUT", url, data=data, headers=headers, ok=(201,)).close()

    def put_manifest(self, tag: str, body: bytes) -> None:
        self.request("PUT", f"{self.base}/manifests/{tag}", data=body,
                     headers={"Content-Type": MEDIA_MANIFEST}, ok=(201,)).close()

    def tags(self) -> list:
        out, url = [], f"{self.base}/tags/list?n=1000"
        while url:
            try:
                with self.request("GET", url) as r:
                    out += json.loads(r.read(64 << 20)).get("tags") or []
                    link = r.headers.get("Link", "")
            except Miss:
                return out   # no repository yet
            m = re.match(r'<([^>]+)>', link)
            url = urllib.parse.urljoin(f"https://{self.host}/", m.group(1)) if m else None
        return out

    def delete_manifest(self, digest: str) -> None:
        self.request("DELETE", f"{self.base}/manifests/{digest}", ok=(202,)).close()
