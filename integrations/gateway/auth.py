"""Who a Streamable HTTP client is: a static tokens file, or OAuth 2.1 bearer JWTs from an identity provider.

The gateway is an OAuth *resource server* in the MCP authorization spec's sense: it never issues tokens, it
validates them. A request without a valid token gets 401 with `WWW-Authenticate: Bearer resource_metadata=
"…"` naming this gateway's protected-resource metadata (RFC 9728, served at
`/.well-known/oauth-protected-resource` and `/.well-known/oauth-protected-resource/mcp`), which tells a
client such as MCP Inspector which authorization server to ask; a token without a required scope gets 403
`insufficient_scope`.

JWTs (`JwtVerifier`, PyJWT): the signature against the issuer's keys (its JWKS, fetched with a timeout and
cached, found through its RFC 8414 / OpenID metadata unless given; or a local JWKS or PEM file), `iss`,
`aud` (this resource), `exp` and `nbf` (with a small leeway), then the required scopes. Asymmetric algorithms
only: a gateway never shares a secret with the identity provider, and an `HS256` token signed with a public
key as its secret is refused. The principal is `sub`, its roles the values of a claim (default `roles`, a
dotted path such as `realm_access.roles` for Keycloak), its scopes kept in `claims["scopes"]`.

Nothing here logs or returns a token or a claim value: refusals say which check failed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import anyio

from interceptors import Principal
from interceptors.errors import InterceptorsError

logger = logging.getLogger("interceptors.gateway.auth")

METADATA_PATH: Final = "/.well-known/oauth-protected-resource"
ASYMMETRIC: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
FETCH_TIMEOUT_S: Final = 5.0
KEYS_TTL_S: Final = 300.0
REFETCH_AFTER_S: Final = 30.0
"""An unknown `kid` fetches the JWKS again (keys rotate), at most once in this many seconds."""
MAX_DOCUMENT_BYTES: Final = 1 << 20
LEEWAY_S: Final = 30


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request is not admitted: the HTTP status, the RFC 6750 error code and a description for humans."""

    status: int
    error: str | None = None
    description: str | None = None
    scope: str | None = None


MISSING: Final = Refusal(401)
"""No credentials at all: RFC 6750 §3.1 says the challenge then carries no error code."""


class AuthUnavailable(InterceptorsError):
    """The identity provider's keys could not be had (down, slow, not JSON): no token can be checked now."""


class Authenticator:
    """The HTTP front's door: `await admit(authorization_header)` is a Principal or a Refusal."""

    authorization_servers: Sequence[str] = ()
    scopes_supported: Sequence[str] = ()
    resource: str | None = None

    async def admit(self, authorization: str | None) -> Principal | Refusal:
        raise NotImplementedError


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class StaticTokens(Authenticator):
    """A tokens file (`BearerTokens`): no authorization server, so the metadata names none."""

    def __init__(self, tokens: Any, resource: str | None = None) -> None:
        self.tokens = tokens
        self.resource = resource

    async def admit(self, authorization: str | None) -> Principal | Refusal:
        if bearer_token(authorization) is None:
            return MISSING
        principal: Principal | None = self.tokens.authenticate(authorization)
        if principal is None:
            return Refusal(401, "invalid_token", "The bearer token is not known")
        return principal


@dataclass
class JwtSettings:
    """`--auth-issuer`, `--auth-audience`, `--auth-jwks` (URL or file), `--auth-scope`, `--auth-roles-claim`."""

    issuer: str
    audience: str
    jwks: str | None = None
    required_scopes: Sequence[str] = ()
    roles_claim: str = "roles"
    resource: str | None = None
    """The resource URL in the metadata document (default: the audience when it is a URL, else the request's)."""
    algorithms: Sequence[str] = field(default=ASYMMETRIC)
    fetch_timeout_s: float = FETCH_TIMEOUT_S
    leeway_s: int = LEEWAY_S
    refetch_after_s: float = REFETCH_AFTER_S


class JwtVerifier(Authenticator):
    """OAuth 2.1 access tokens as JWTs, checked against the issuer's published keys."""

    def __init__(self, settings: JwtSettings) -> None:
        import jwt  # PyJWT: loaded only when OAuth is configured

        self._jwt = jwt
        self.settings = settings
        self.authorization_servers = (settings.issuer,)
        self.scopes_supported = tuple(settings.required_scopes)
        self.resource = settings.resource or (settings.audience if "://" in settings.audience else None)
        algorithms = [a for a in settings.algorithms if a in ASYMMETRIC]
        if not algorithms:
            raise ValueError("--auth-algorithm: only asymmetric algorithms are accepted (RS*, PS*, ES*, EdDSA)")
        self.algorithms = algorithms
        self._keys: dict[str | None, Any] = {}
        self._fetched_at = -1e18
        self._lock = threading.Lock()
        self._file = None if settings.jwks is None or "://" in settings.jwks else Path(settings.jwks)
        if self._file is not None:
            self._keys = load_key_file(self._file)  # a typo in the path is an error at start, not a 401 later
            self._fetched_at = float("inf")

    async def admit(self, authorization: str | None) -> Principal | Refusal:
        token = bearer_token(authorization)
        if token is None:
            return MISSING
        jwt = self._jwt
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return Refusal(401, "invalid_token", "The bearer token is not a JWT")
        kid = header.get("kid")
        if header.get("alg") not in self.algorithms:
            return Refusal(401, "invalid_token", "The token's signing algorithm is not accepted")
        try:
            key = self._key(kid if isinstance(kid, str) else None, refresh=False)
            if key is None:
                key = await anyio.to_thread.run_sync(self._key, kid if isinstance(kid, str) else None, True)
        except AuthUnavailable as exc:
            logger.warning("cannot check bearer tokens: %s", exc)
            return Refusal(503, "temporarily_unavailable", "The identity provider's keys could not be fetched")
        if key is None:
            return Refusal(401, "invalid_token", "The token is not signed by a key of the issuer")
        return self._verify(token, key)

    def _verify(self, token: str, key: Any) -> Principal | Refusal:
        jwt, settings = self._jwt, self.settings
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_s,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError:
            return Refusal(401, "invalid_token", "The token has expired")
        except jwt.ImmatureSignatureError:
            return Refusal(401, "invalid_token", "The token is not valid yet")
        except jwt.InvalidAudienceError:
            return Refusal(401, "invalid_token", "The token was not issued for this resource")
        except jwt.InvalidIssuerError:
            return Refusal(401, "invalid_token", "The token was not issued by the expected issuer")
        except jwt.InvalidSignatureError:
            return Refusal(401, "invalid_token", "The token's signature is invalid")
        except jwt.MissingRequiredClaimError as exc:
            return Refusal(401, "invalid_token", f"The token has no {exc.claim} claim")
        except jwt.PyJWTError:
            return Refusal(401, "invalid_token", "The token is invalid")
        scopes = scopes_of(claims)
        missing = [scope for scope in settings.required_scopes if scope not in scopes]
        if missing:
            wanted = " ".join(settings.required_scopes)
            return Refusal(403, "insufficient_scope", f"The token lacks the scope {missing[0]}", wanted)
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            return Refusal(401, "invalid_token", "The token's sub claim is not a string")
        kind = "service" if claims.get("client_id") == subject else "user"  # RFC 9068 client credentials
        roles = roles_from(claims, settings.roles_claim)
        return Principal(kind, subject, {"roles": roles, "scopes": sorted(scopes), "iss": settings.issuer})

    # Keys ------------------------------------------------------------------------------------------
    def _key(self, kid: str | None, refresh: bool) -> Any:
        """The key for `kid` (None: the only key, when there is one). Without `refresh` (the event loop) only the
        cache is read, never a lock; with it (a worker thread) the JWKS is fetched when the cache is stale or
        lacks the key, one fetch at a time. A stale key outlives an issuer that cannot be reached."""
        found = self._pick(kid)
        now = time.monotonic()
        if not refresh:
            return found if found is not None and now - self._fetched_at < KEYS_TTL_S else None
        with self._lock:
            found = self._pick(kid)
            age = time.monotonic() - self._fetched_at
            if found is not None and age < KEYS_TTL_S:
                return found  # another request fetched it meanwhile
            if found is None and age < self.settings.refetch_after_s:
                return None  # an unknown key, and the set was fetched moments ago
            try:
                keys = self._fetch_keys()
            except AuthUnavailable as exc:
                if found is None:
                    raise
                logger.warning("keeping the issuer's cached keys: %s", exc)
                return found
            self._keys, self._fetched_at = keys, time.monotonic()
            return self._pick(kid)

    def _pick(self, kid: str | None) -> Any:
        """The key named `kid`; else a key without a name (a PEM file's); a token without `kid`: the only key."""
        if kid is not None and kid in self._keys:
            return self._keys[kid]
        if kid is None and len(self._keys) == 1:
            return next(iter(self._keys.values()))
        return self._keys.get(None)

    def _fetch_keys(self) -> dict[str | None, Any]:
        url = self.settings.jwks or self._discover_jwks_uri()
        return parse_jwks(fetch_json(url, self.settings.fetch_timeout_s), url)

    def _discover_jwks_uri(self) -> str:
        """The issuer's `jwks_uri` from its RFC 8414 metadata, else its OpenID configuration."""
        issuer = self.settings.issuer
        problems: list[str] = []
        for url in metadata_urls(issuer):
            try:
                document = fetch_json(url, self.settings.fetch_timeout_s)
            except AuthUnavailable as exc:
                problems.append(str(exc))
                continue
            uri = document.get("jwks_uri") if isinstance(document, Mapping) else None
            if document.get("issuer") != issuer:
                problems.append(f"{url} names another issuer")
                continue
            if isinstance(uri, str) and uri.startswith(("https://", "http://")):
                self.settings.jwks = uri
                return uri
            problems.append(f"{url} has no jwks_uri")
        raise AuthUnavailable("; ".join(problems) or f"no metadata for the issuer {issuer}")


def metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 §3 (the well-known segment before the issuer's path), then OpenID Discovery (appended)."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    base = f"{parts.scheme}://{parts.netloc}"
    return [
        f"{base}/.well-known/oauth-authorization-server{path}",
        f"{base}{path}/.well-known/openid-configuration",
    ]


def fetch_json(url: str, timeout: float) -> Any:
    """GET a JSON document (at most 1 MiB) within `timeout` seconds; AuthUnavailable names the URL."""
    shown = safe_url(url)
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # an operator's URL
            body = response.read(MAX_DOCUMENT_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise AuthUnavailable(f"{shown} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise AuthUnavailable(f"could not reach {shown}: {getattr(reason, 'strerror', None) or reason}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise AuthUnavailable(f"{shown} sent more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        return json.loads(body)
    except ValueError:
        raise AuthUnavailable(f"{shown} did not send JSON") from None


def safe_url(url: str) -> str:
    """A URL without user info and query (where credentials hide)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme}://{netloc}{parts.path}"


def parse_jwks(document: Any, source: str) -> dict[str | None, Any]:
    """Public keys by `kid` from a JWK Set (`{"keys": [...]}`) or one JWK; keys PyJWT cannot use are skipped."""
    import jwt

    if isinstance(document, Mapping) and "keys" not in document and "kty" in document:
        document = {"keys": [document]}
    if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
        raise AuthUnavailable(f"{safe_url(source) if '://' in source else source} is not a JWK Set")
    keys: dict[str | None, Any] = {}
    for entry in document["keys"]:
        if not isinstance(entry, Mapping) or entry.get("use", "sig") != "sig" or "d" in entry:
            continue  # an encryption key, or a private one (never trusted from a document)
        try:
            key = jwt.PyJWK.from_dict(dict(entry))
        except jwt.PyJWTError:
            continue
        kid = entry.get("kid")
        keys[kid if isinstance(kid, str) else None] = key.key
    return keys


def load_key_file(path: Path) -> dict[str | None, Any]:
    """A local JWKS (JSON) or a PEM public key, for an issuer whose keys are configured by hand."""
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read --auth-jwks file {str(path)!r}: {exc.strerror}") from None
    if text.lstrip().startswith("-----BEGIN"):
        from cryptography.hazmat.primitives.serialization import load_pem_public_key

        try:
            return {None: load_pem_public_key(text.encode())}
        except ValueError:
            raise ValueError(f"--auth-jwks file {str(path)!r} is not a PEM public key") from None
    try:
        keys = parse_jwks(json.loads(text), str(path))
    except (ValueError, AuthUnavailable):
        raise ValueError(f"--auth-jwks file {str(path)!r} is neither a JWK Set nor a PEM public key") from None
    if not keys:
        raise ValueError(f"--auth-jwks file {str(path)!r} holds no public signing key")
    return keys


def scopes_of(claims: Mapping[str, Any]) -> set[str]:
    """`scope` (RFC 9068: space-separated) or `scp` (a list, as some providers send)."""
    scope = claims.get("scope")
    found = set(scope.split()) if isinstance(scope, str) else set()
    scp = claims.get("scp")
    if isinstance(scp, list):
        found.update(item for item in scp if isinstance(item, str))
    elif isinstance(scp, str):
        found.update(scp.split())
    return found


def roles_from(claims: Mapping[str, Any], path: str) -> list[str]:
    """The roles at a dotted claim path: a list of strings, or a string of space-separated ones (so
    `--auth-roles-claim scope` makes the token's scopes its roles); anything else is no role."""
    value: Any = claims
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return sorted(set(value.split()))
    if isinstance(value, list):
        return sorted({item for item in value if isinstance(item, str)})
    return []


# The metadata document and the challenge ---------------------------------------------------------------
_HOST_CHARACTERS: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]")


def resource_url(auth: Authenticator, host: str, mcp_path: str) -> str:
    """This resource's identifier: configured, else `http://HOST/mcp` as the client reached it (a Host
    header with anything but name characters is not echoed into a header or a document)."""
    if auth.resource:
        return auth.resource
    if not host or len(host) > 255 or not set(host) <= _HOST_CHARACTERS:
        host = "localhost"
    return f"http://{host}{mcp_path}"


def metadata_url(auth: Authenticator, host: str, mcp_path: str) -> str:
    """RFC 9728 §3.1: the well-known segment between the resource's authority and its path."""
    parts = urllib.parse.urlsplit(resource_url(auth, host, mcp_path))
    return f"{parts.scheme}://{parts.netloc}{METADATA_PATH}{parts.path.rstrip('/')}"


def metadata_document(auth: Authenticator, host: str, mcp_path: str) -> dict[str, Any]:
    document: dict[str, Any] = {
        "resource": resource_url(auth, host, mcp_path),
        "bearer_methods_supported": ["header"],
    }
    if auth.authorization_servers:
        document["authorization_servers"] = list(auth.authorization_servers)
    if auth.scopes_supported:
        document["scopes_supported"] = list(auth.scopes_supported)
    return document


def challenge(auth: Authenticator, refusal: Refusal, host: str, mcp_path: str) -> bytes:
    """The `WWW-Authenticate` value (RFC 6750 §3, with RFC 9728's `resource_metadata`)."""
    parts = [f'resource_metadata="{metadata_url(auth, host, mcp_path)}"']
    if refusal.error is not None:
        parts.append(f'error="{refusal.error}"')
    if refusal.description is not None:
        parts.append(f'error_description="{refusal.description}"')
    if refusal.scope is not None:
        parts.append(f'scope="{refusal.scope}"')
    return ("Bearer " + ", ".join(parts)).encode("latin-1", "replace")
