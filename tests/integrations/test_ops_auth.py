"""The HTTP gateway as an OAuth 2.1 resource server (issue 32): bearer JWTs of a real local issuer (a key made
here, its JWKS and RFC 8414 metadata served over real HTTP on loopback), checked by the real gateway process;
401/403 with the MCP authorization spec's `WWW-Authenticate`; the RFC 9728 metadata document; and the
tokens file's own rules (permissions, a typo named, the truth about listening beyond loopback)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.shared.exceptions import MCPError

from integrations.gateway.auth import JwtSettings, JwtVerifier, Refusal
from interceptors import Principal
from tests.conftest import ROOT
from tests.integrations.gateway.router.test_router_http import http_gateway, initialize, sdk_client
from tests.integrations.gateway.test_gateway import STEP_S, TEST_S, UPSTREAM, text_of

AUDIENCE = "https://gateway.example/mcp"
METADATA = "https://gateway.example/.well-known/oauth-protected-resource/mcp"


class Issuer:
    """A local identity provider: RFC 8414 metadata and a JWKS on loopback, and tokens signed with its key."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.kid = "key-1"
        self.url = ""
        self.jwks_requests = 0
        self.keys: list[tuple[str, Any]] = [(self.kid, self.key)]

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys:
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "RS256"})
        return {"keys": keys}

    def token(self, key: Any = None, kid: str | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 600,
                "scope": "mcp:tools", "roles": ["analyst"], **claims}  # fmt: skip
        body = {name: value for name, value in body.items() if value is not None}
        return jwt.encode(body, key or self.key, algorithm="RS256", headers={"kid": kid or self.kid})


@contextmanager
def local_issuer() -> Iterator[Issuer]:
    issuer = Issuer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/.well-known/oauth-authorization-server":
                body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks", "token_endpoint": issuer.url + "/t"}
            elif self.path == "/jwks":
                issuer.jwks_requests += 1
                body = issuer.jwks()
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    issuer.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STEP_S)


def challenge_of(response: httpx2.Response) -> dict[str, str]:
    value = response.headers["www-authenticate"]
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer"
    parts = {}
    for item in rest.split(", "):
        name, _, quoted = item.partition("=")
        parts[name] = quoted.strip('"')
    return parts


# The gateway process ------------------------------------------------------------------------------
@pytest.mark.anyio
@pytest.mark.slow
async def test_a_gateway_accepts_the_issuers_tokens_and_refuses_the_others_with_the_spec_challenge(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "tourists.yaml"  # the token's roles claim reaches the policy's role rules
    policy.write_text(
        "name: tourists\nextends: open\nrules:\n  - name: no-echo\n    match: {roles: [tourist]}\n"
        "    deny_tools: [echo]\n"
    )
    with local_issuer() as issuer:
        flags = ("--auth-issuer", issuer.url, "--auth-audience", AUDIENCE, "--auth-scope", "mcp:tools",
                 "--policy", str(policy))  # fmt: skip
        with anyio.fail_after(TEST_S):
            async with http_gateway(*flags) as gateway, httpx2.AsyncClient(timeout=STEP_S) as raw:
                base = gateway.url.rsplit("/mcp", 1)[0]
                # the metadata document, at both RFC 9728 places
                for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
                    document = (await raw.get(base + path)).json()
                    assert document["resource"] == AUDIENCE
                    assert document["authorization_servers"] == [issuer.url]
                    assert document["scopes_supported"] == ["mcp:tools"]
                # no token: 401, the challenge names the metadata and carries no error (RFC 6750 §3.1)
                missing = await initialize(raw, gateway.url)
                assert missing.status_code == 401
                assert challenge_of(missing) == {"resource_metadata": METADATA}
                wrong_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
                now = int(time.time())
                refused = {
                    "expired": issuer.token(exp=now - 3600, iat=now - 7200),
                    "wrong audience": issuer.token(aud="https://another.example/mcp"),
                    "wrongly signed": issuer.token(key=wrong_key),
                    "unknown key": issuer.token(key=wrong_key, kid="key-9"),
                    "another issuer": issuer.token(iss="http://127.0.0.1:1"),
                    "not yet valid": issuer.token(nbf=now + 3600),
                    "no exp": issuer.token(exp=None),
                    "not a JWT": "plainly-not-a-jwt",
                }
                for case, token in refused.items():
                    answer = await initialize(raw, gateway.url, token)
                    assert answer.status_code == 401, case
                    challenge = challenge_of(answer)
                    assert challenge["error"] == "invalid_token", case
                    assert challenge["resource_metadata"] == METADATA, case
                    assert token not in answer.text and token not in answer.headers["www-authenticate"]
                # a valid token without the required scope: 403 insufficient_scope, naming the scope
                narrow = await initialize(raw, gateway.url, issuer.token(scope="other"))
                assert narrow.status_code == 403
                assert challenge_of(narrow)["error"] == "insufficient_scope"
                assert challenge_of(narrow)["scope"] == "mcp:tools"
                # a valid token: a whole SDK session works
                http, client = sdk_client(gateway.url, "legacy", issuer.token())
                async with http, client:
                    assert text_of(await client.call_tool("echo", {"text": "hello"})) == "hello"
                http, client = sdk_client(gateway.url, "legacy", issuer.token(sub="tom", roles=["tourist"]))
                async with http, client:
                    with pytest.raises(MCPError):  # hidden from a tourist by the policy's role rule
                        await client.call_tool("echo", {"text": "hello"})
                assert issuer.jwks_requests == 1  # fetched at first use, then cached (an unknown kid: once per 30 s)


# The verifier in process --------------------------------------------------------------------------
def verifier(issuer: Issuer, **options: Any) -> JwtVerifier:
    return JwtVerifier(JwtSettings(issuer=issuer.url, audience=AUDIENCE, **options))


@pytest.mark.anyio
async def test_claims_become_the_principal_and_its_roles() -> None:
    with local_issuer() as issuer:
        admitted = await verifier(issuer).admit(f"Bearer {issuer.token(scp=['extra'])}")
        assert admitted == Principal(
            "user", "alice", {"roles": ["analyst"], "scopes": ["extra", "mcp:tools"], "iss": issuer.url}
        )
        keycloak = verifier(issuer, roles_claim="realm_access.roles")
        token = issuer.token(roles=None, realm_access={"roles": ["ops", "admin", 3]})
        principal = await keycloak.admit(f"Bearer {token}")
        assert isinstance(principal, Principal) and principal.claims is not None
        assert principal.claims["roles"] == ["admin", "ops"]
        by_scope = await verifier(issuer, roles_claim="scope").admit(f"Bearer {issuer.token(scope='read write')}")
        assert isinstance(by_scope, Principal) and by_scope.claims is not None
        assert by_scope.claims["roles"] == ["read", "write"]  # the scopes as roles
        service = await verifier(issuer).admit(f"Bearer {issuer.token(sub='ci-bot', client_id='ci-bot')}")
        assert isinstance(service, Principal) and service.type == "service"


@pytest.mark.anyio
async def test_a_rotated_key_is_fetched_and_a_symmetric_token_is_refused() -> None:
    with local_issuer() as issuer:
        checker = verifier(issuer, refetch_after_s=0)
        assert isinstance(await checker.admit(f"Bearer {issuer.token()}"), Principal)
        rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        issuer.keys.append(("key-2", rotated))
        assert isinstance(await checker.admit(f"Bearer {issuer.token(key=rotated, kid='key-2')}"), Principal)
        # an HS256 token whose secret is the public key (the algorithm-confusion attack)
        public_pem = issuer.key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        body = {"iss": issuer.url, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 60}
        import hashlib
        import hmac

        header = jwt.utils.base64url_encode(json.dumps({"alg": "HS256", "kid": "key-1"}).encode())
        payload = jwt.utils.base64url_encode(json.dumps(body).encode())
        signature = hmac.new(public_pem, header + b"." + payload, hashlib.sha256).digest()
        forged = (header + b"." + payload + b"." + jwt.utils.base64url_encode(signature)).decode()
        refused = await checker.admit(f"Bearer {forged}")
        assert refused == Refusal(401, "invalid_token", "The token's signing algorithm is not accepted")


@pytest.mark.anyio
async def test_an_unreachable_issuer_is_503_and_a_local_key_file_needs_no_issuer(tmp_path: Path) -> None:
    with local_issuer() as issuer:
        token = issuer.token()
        pem = tmp_path / "issuer.pem"
        pem.write_bytes(
            issuer.key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        jwks = tmp_path / "jwks.json"
        jwks.write_text(json.dumps(issuer.jwks()))
        url = issuer.url
    down = JwtVerifier(JwtSettings(issuer=url, audience=AUDIENCE, fetch_timeout_s=2))
    assert (await down.admit(f"Bearer {token}")).status == 503  # type: ignore[union-attr]
    for path in (pem, jwks):
        local = JwtVerifier(JwtSettings(issuer=url, audience=AUDIENCE, jwks=str(path)))
        assert isinstance(await local.admit(f"Bearer {token}"), Principal)
    with pytest.raises(ValueError, match=r"cannot read --auth-jwks file .*: No such file or directory"):
        JwtVerifier(JwtSettings(issuer=url, audience=AUDIENCE, jwks=str(tmp_path / "missing.json")))
    (tmp_path / "notes.txt").write_text("not a key")
    with pytest.raises(ValueError, match="neither a JWK Set nor a PEM public key"):
        JwtVerifier(JwtSettings(issuer=url, audience=AUDIENCE, jwks=str(tmp_path / "notes.txt")))


# The tokens file and --listen ---------------------------------------------------------------------
def run_proxy(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", *flags, "--", *UPSTREAM],
        cwd=ROOT, capture_output=True, text=True, timeout=STEP_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_readable_tokens_file_with_tokens_in_clear_is_refused_with_the_chmod(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - {id: alice, token: alice-token}\n")
    tokens.chmod(0o644)
    done = run_proxy("--listen", "127.0.0.1:0", "--tokens", str(tokens))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"error: --tokens file {str(tokens)!r} holds tokens in clear and everyone may read it: run chmod 600 "
        f"{tokens} (or keep token_sha256 digests or token_env names in it instead)"
    )
    assert "alice-token" not in done.stderr
    tokens.chmod(0o640)
    assert "its group may read it" in run_proxy("--listen", "127.0.0.1:0", "--tokens", str(tokens)).stderr


def test_a_typo_in_the_tokens_file_names_the_key(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - {id: alice, tokn: alice-token, Xq7Zr9sK2: bob}\n")
    tokens.chmod(0o600)
    done = run_proxy("--listen", "127.0.0.1:0", "--tokens", str(tokens))
    assert done.returncode == 2
    assert "unknown key 'tokn' (did you mean 'token'?)" in done.stderr
    assert "Invalid tokens file" in done.stderr and "Invalid policy" not in done.stderr
    assert "Xq7Zr9sK2" not in done.stderr and "alice-token" not in done.stderr  # could be values: not shown


def test_listening_beyond_loopback_needs_authentication_and_says_so(tmp_path: Path) -> None:
    done = run_proxy("--listen", "0.0.0.0:0")
    assert done.returncode == 2
    assert "beyond loopback the gateway needs authentication (--tokens FILE, or --auth-issuer" in done.stderr
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - {id: alice, token: alice-token}\n")
    tokens.chmod(0o600)
    process = subprocess.Popen(
        [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--listen", "0.0.0.0:0",
         "--tokens", str(tokens), "--", *UPSTREAM],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert "listening on http://0.0.0.0:" in line and "(bearer tokens of the tokens file)" in line, line
        assert "without authentication" not in line
        port = int(line.split("0.0.0.0:", 1)[1].split("/", 1)[0])
        with httpx2.Client(timeout=STEP_S) as raw:  # by loopback, with a Host naming the address it is known by
            url = f"http://127.0.0.1:{port}/mcp"
            headers = {"host": f"gateway.example:{port}", "accept": "application/json, text/event-stream"}
            params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            body = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}
            anonymous = raw.post(url, json=body, headers=headers)
            assert anonymous.status_code == 401
            assert challenge_of(anonymous)["resource_metadata"] == (
                f"http://gateway.example:{port}/.well-known/oauth-protected-resource/mcp"
            )
            admitted = raw.post(url, json=body, headers={**headers, "authorization": "Bearer alice-token"})
            assert admitted.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=STEP_S)
        assert process.stderr is not None
        process.stderr.close()
