"""Bearer tokens, the OAuth token endpoint, and TLS test certificates for the Drive emulator.

Tokens
------
``Auth.identify(header)`` accepts ``Authorization: Bearer TOKEN`` when TOKEN is a static token
(``--access-token``, valid forever) or a token issued by the token endpoint that has not outlived its
lifetime. With no way to get a token configured at all, any non-empty bearer token is accepted.

Scopes: a static token has the full ``drive`` scope unless it was added with another one
(``--readonly-token TOK``: ``drive.readonly``; ``Auth.add_token(TOK, SCOPE)``, reached by
``POST /_emu/tokens``); an issued token has the scope of its grant (the refresh grant's ``scope``
field, the JWT's ``scope`` claim, the metadata server's ``?scopes=``, or whatever that asks,
``--metadata-scope SCOPE``: ``Auth(metadata_scope=...)``, a Colab credential endpoint before the
notebook's consent hands out a token without Drive). Reads need any Drive scope
(content: drive, drive.readonly or drive.file); writes need ``drive`` or ``drive.file``
(``scope_allows_write``), metadata-only writes also ``drive.metadata``; others get 403
insufficientPermissions (emuwrite.py).

Users
-----
``identify`` also names the user a token authenticates as (the per-user request quota, emuquota.py,
keeps a bucket per user): ``DRIVE_USER`` (the drive's owner) for static tokens, any token in the open
mode, refresh-token grants and metadata-server tokens; for a JWT-bearer grant the account it acts
for: the JWT's ``sub`` when present (domain-wide delegation), else its ``iss``.

Token endpoint (``POST /token``, form-urlencoded)
-------------------------------------------------
* ``grant_type=refresh_token`` with client_id, client_secret (form fields or HTTP Basic) and
  refresh_token: must match ``--client-id/--client-secret/--refresh-token``. A wrong client gets
  401 ``invalid_client``; a wrong refresh token 400 ``invalid_grant``. The token has the scope the
  request asks for (its ``scope`` field), else the scope the refresh token was consented with:
  ``--grant-scope SCOPE`` (``Auth(grant_scope=...)``; default the full ``drive`` scope), so a test
  can hand out a refresh token that only grants ``drive.readonly``.
* ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`` with ``assertion``: an RS256 JWT whose
  signature is checked with ``openssl dgst -sha256 -verify`` against ``--sa-public-key``; ``iss`` must be
  ``--sa-email``, ``aud`` must end in ``/token``, ``exp - iat`` <= 3600 and now within [iat - 300,
  exp + 300], and ``scope`` must be present. Any failure: 400 ``invalid_grant`` with a description.
* Success: ``{"access_token": "ya29.<random>", "expires_in": lifetime, "scope": ..., "token_type": "Bearer"}``.

Tokens are random from a generator seeded by ``--seed`` and are never logged.

TLS
---
``ensure_tls_files(dir)`` makes ``ca.pem``, ``server.pem`` and ``server.key`` with the openssl command when
any is missing: a test CA and a server certificate for IP 127.0.0.1 and DNS localhost signed by it.
"""

import base64
import binascii
import json
import os
import random
import shutil
import subprocess
import tempfile
import threading
import time

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_SCOPE = "https://www.googleapis.com/auth/drive"
CLOCK_SKEW_S = 300
MAX_JWT_LIFETIME_S = 3600
DRIVE_USER = "me"                  # the user of static, refresh-grant, open-mode and metadata tokens
_TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
# Scopes that allow reading file content; a token with only other Drive scopes may read metadata.
CONTENT_SCOPES = {"https://www.googleapis.com/auth/" + s for s in ("drive", "drive.readonly", "drive.file")}
DRIVE_SCOPE_PREFIX = "https://www.googleapis.com/auth/drive"
READONLY_SCOPE = DRIVE_SCOPE_PREFIX + ".readonly"
WRITE_SCOPES = {DRIVE_SCOPE_PREFIX, DRIVE_SCOPE_PREFIX + ".file"}


class GrantError(Exception):
    """A token-endpoint failure: HTTP status, OAuth error code, description."""

    def __init__(self, status, error, description):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description

    def body(self):
        return {"error": self.error, "error_description": self.description}


def b64url_decode(text):
    text = text.strip()
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_key_pem(path):
    """The public key PEM for ``path``, which may hold a public key, a private key or a certificate."""
    with open(path, "rb") as f:
        data = f.read()
    if b"PRIVATE KEY" in data:
        args = ["openssl", "pkey", "-in", path, "-pubout"]
    elif b"CERTIFICATE" in data:
        args = ["openssl", "x509", "-in", path, "-pubkey", "-noout"]
    else:
        return data
    return subprocess.run(args, check=True, capture_output=True, timeout=30).stdout


class Auth:
    def __init__(self, access_tokens=(), client_id=None, client_secret=None, refresh_token=None,
                 token_lifetime=3600, sa_public_key=None, sa_email=None, seed=0, grant_scope=None,
                 metadata_scope=None):
        self.static_tokens = {token: DEFAULT_SCOPE for token in access_tokens}
        self.client_id, self.client_secret, self.refresh_token = client_id, client_secret, refresh_token
        self.token_lifetime = token_lifetime
        self.grant_scope = grant_scope or DEFAULT_SCOPE   # what the refresh token was consented for
        self.metadata_scope = metadata_scope              # None: the metadata server grants what is asked
        self.sa_email = sa_email
        self.sa_key_pem = public_key_pem(sa_public_key) if sa_public_key else None
        self.open = not (self.static_tokens or refresh_token or self.sa_key_pem)
        self._issued = {}                   # token -> (monotonic expiry, scope string, user)
        self._lock = threading.Lock()
        self._rng = random.Random(f"tokens:{seed}")

    # -- checking -----------------------------------------------------------------------------------

    def identify(self, header):
        """(scope string, user) for a valid ``Authorization`` header value, or None when it is not
        valid. The user is described in the module doc."""
        if not header or not header.startswith("Bearer "):
            return None
        token = header[len("Bearer "):].strip()
        if not token:
            return None
        if token in self.static_tokens:
            return self.static_tokens[token], DRIVE_USER
        if self.open:
            return DEFAULT_SCOPE, DRIVE_USER
        with self._lock:
            entry = self._issued.get(token)
            if entry is None:
                return None
            expiry, scope, user = entry
            if time.monotonic() >= expiry:
                del self._issued[token]
                return None
            return scope, user

    def add_token(self, token, scope=DEFAULT_SCOPE):
        """Accept ``token`` forever with ``scope`` (a space-separated scope string). In the open mode
        (any bearer token accepted) other tokens stay accepted, with the full scope."""
        if not isinstance(token, str) or not token.strip() or not isinstance(scope, str):
            raise ValueError("a token needs a non-empty string 'token' and a string 'scope'")
        with self._lock:
            self.static_tokens[token.strip()] = scope

    def token_info(self, token):
        """What Google's tokeninfo endpoint says of ``token``: {"scope", "expires_in"}, or None."""
        found = self.identify(f"Bearer {token}") if token else None
        if found is None:
            return None
        with self._lock:
            entry = self._issued.get(token)
        left = int(entry[0] - time.monotonic()) if entry else 315360000
        return {"scope": found[0], "expires_in": str(max(0, left)), "access_type": "online"}

    # -- token endpoint -----------------------------------------------------------------------------

    def grant(self, form, basic_auth=None):
        """Answer a token request: returns the JSON reply or raises GrantError.

        ``form`` maps field -> value; ``basic_auth`` is (client_id, secret) from an Authorization header.
        """
        grant_type = form.get("grant_type", "")
        if grant_type == "refresh_token":
            return self._refresh_grant(form, basic_auth)
        if grant_type == JWT_BEARER:
            return self._jwt_grant(form.get("assertion", ""))
        raise GrantError(400, "unsupported_grant_type", f"Invalid grant_type: {grant_type}")

    def issue(self, scope):
        """A fresh token for the metadata server (no scope field in the reply, as on GCE): the scope
        asked for, or ``metadata_scope`` when set."""
        return self._issue(self.metadata_scope or scope, with_scope=False)

    def _issue(self, scope, with_scope=True, user=DRIVE_USER):
        token = "ya29." + "".join(self._rng.choice(_TOKEN_CHARS) for _ in range(120))
        with self._lock:
            now = time.monotonic()
            for old in [t for t, (expiry, _, _) in self._issued.items() if expiry <= now]:
                del self._issued[old]
            self._issued[token] = (now + self.token_lifetime, scope, user)
        reply = {"access_token": token, "expires_in": int(self.token_lifetime), "token_type": "Bearer"}
        if with_scope:
            reply["scope"] = scope
        return reply

    def _refresh_grant(self, form, basic_auth):
        client_id, secret = basic_auth or (form.get("client_id"), form.get("client_secret"))
        if self.client_id is None or client_id != self.client_id:
            raise GrantError(401, "invalid_client", "The OAuth client was not found.")
        if secret != self.client_secret:
            raise GrantError(401, "invalid_client", "Unauthorized")
        if form.get("refresh_token") != self.refresh_token:
            raise GrantError(400, "invalid_grant", "Token has been expired or revoked.")
        return self._issue(form.get("scope") or self.grant_scope)

    def _jwt_grant(self, assertion):
        def bad(description):
            return GrantError(400, "invalid_grant", description)

        parts = assertion.split(".")
        if len(parts) != 3:
            raise bad("Invalid JWT: the assertion must have three dot-separated parts.")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
        except (ValueError, binascii.Error) as exc:
            raise bad(f"Invalid JWT: cannot decode ({exc.__class__.__name__}).") from exc
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise bad("Invalid JWT: header and claims must be JSON objects.")
        if header.get("alg") != "RS256":
            raise bad("Invalid JWT: the alg must be RS256.")
        if self.sa_key_pem is None or claims.get("iss") != self.sa_email:
            raise bad("Invalid grant: account not found")
        if not self._signature_ok((parts[0] + "." + parts[1]).encode("ascii"), signature):
            raise bad("Invalid JWT Signature.")
        aud = claims.get("aud")
        if not isinstance(aud, str) or not aud.endswith("/token"):
            raise bad("Invalid JWT: Failed audience check.")
        iat, exp = claims.get("iat"), claims.get("exp")
        now = time.time()
        if (not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)) or exp <= iat
                or exp - iat > MAX_JWT_LIFETIME_S or now < iat - CLOCK_SKEW_S or now > exp + CLOCK_SKEW_S):
            raise bad("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable "
                      "timeframe. Check your iat and exp values in the JWT claim.")
        scope = claims.get("scope")
        if not isinstance(scope, str) or not scope.strip():
            raise bad("Invalid JWT: the scope claim is missing.")
        user = claims.get("sub") if isinstance(claims.get("sub"), str) and claims["sub"] else self.sa_email
        return self._issue(scope, with_scope=False, user=user)

    def _signature_ok(self, signed, signature):
        with tempfile.TemporaryDirectory(prefix="emu-jwt-") as tmp:
            paths = {}
            for name, data in (("key.pem", self.sa_key_pem), ("data", signed), ("sig", signature)):
                paths[name] = os.path.join(tmp, name)
                with open(paths[name], "wb") as f:
                    f.write(data)
            result = subprocess.run(
                ["openssl", "dgst", "-sha256", "-verify", paths["key.pem"], "-signature", paths["sig"],
                 paths["data"]], capture_output=True, timeout=30)
            return result.returncode == 0


def scope_allows_content(scope):
    return any(s in CONTENT_SCOPES for s in scope.split())


def scope_allows_write(scope, content=True):
    """Whether ``scope`` may write: content needs drive or drive.file; metadata-only writes (folders,
    renames, trash, delete) also drive.metadata."""
    allowed = WRITE_SCOPES if content else WRITE_SCOPES | {DRIVE_SCOPE_PREFIX + ".metadata"}
    return any(s in allowed for s in scope.split())


def scope_allows_drive(scope):
    return any(s.startswith(DRIVE_SCOPE_PREFIX) for s in scope.split())


# ---------------------------------------------------------------------------------------------------
# TLS test certificates

TLS_FILES = ("ca.pem", "server.pem", "server.key")
_SERVER_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1, DNS:localhost
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid, issuer
"""


def ensure_tls_files(directory):
    """Make a test CA and server certificate in ``directory`` unless all of TLS_FILES exist.

    Files are made in a scratch folder and moved in, the CA last, so a reader never sees a mismatched set
    once ca.pem is present. Returns the paths (ca, cert, key).
    """
    paths = tuple(os.path.join(directory, name) for name in TLS_FILES)
    if all(os.path.exists(p) for p in paths):
        return paths
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".tls-") as tmp:
        def run(*args):
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp, timeout=60)

        ec_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        run("req", "-x509", *ec_key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "3650",
            "-subj", "/CN=colabfs drive emulator test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        run("req", "-new", *ec_key, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
        with open(os.path.join(tmp, "server.ext"), "w") as f:
            f.write(_SERVER_EXTENSIONS)
        run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "3650", "-extfile", "server.ext")
        for name in ("server.key", "server.pem", "ca.pem"):
            shutil.move(os.path.join(tmp, name), os.path.join(directory, name))
    return paths
