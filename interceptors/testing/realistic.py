"""Realistic benign tool outputs that a shape-only scanner takes for secrets (precision regression corpus).

Each category is output a model reads every day: lockfile digests, certificates and public keys, object ids
with public prefixes, request ids, schemas, code that *names* a secret, URLs, binary payloads, manifests.
Written for this project (the values are drawn from a fixed seed; nothing is copied from real files), so
`realistic_corpus(seed)` gives the same `(category, tool result)` items on every run.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import struct
import zlib
from collections.abc import Callable
from typing import Any

Item = tuple[str, dict[str, Any]]
_B62 = string.ascii_letters + string.digits
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _b64(rng: random.Random, size: int, urlsafe: bool = False) -> str:
    raw = rng.randbytes(size)
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


def _hex(rng: random.Random, size: int) -> str:
    return rng.randbytes(size).hex()


def _b62(rng: random.Random, size: int) -> str:
    return "".join(rng.choice(_B62) for _ in range(size))


def _wrap(blob: str, width: int = 64) -> str:
    return "\n".join(blob[i : i + width] for i in range(0, len(blob), width))


def _png(rng: random.Random, size: int = 600) -> bytes:
    """A small real PNG (valid chunks) with noisy pixels, so its base64 looks random."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    width = 16
    rows = max(1, size // (width * 3))
    raw = b"".join(b"\x00" + rng.randbytes(width * 3) for _ in range(rows))
    header = struct.pack(">IIBBBBB", width, rows, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


# --- categories -------------------------------------------------------------------------------------------


def _go_sum(rng: random.Random) -> list[dict[str, Any]]:
    mods = ["github.com/google/uuid", "golang.org/x/net", "github.com/stretchr/testify", "go.uber.org/zap"]
    lines = []
    for mod in mods:
        version = f"v{rng.randint(0, 2)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
        lines.append(f"{mod} {version} h1:{_b64(rng, 32)}")
        lines.append(f"{mod} {version}/go.mod h1:{_b64(rng, 32)}")
    return [_text("\n".join(lines) + "\n")]


def _pip_record(rng: random.Random) -> list[dict[str, Any]]:
    files = ["requests/__init__.py", "requests/api.py", "requests/sessions.py", "requests-2.31.0.dist-info/METADATA"]
    lines = [
        f"{f},sha256={base64.urlsafe_b64encode(rng.randbytes(32)).decode().rstrip('=')},{rng.randint(100, 30000)}"
        for f in files
    ]
    req = [
        f"flask==3.0.{rng.randint(0, 3)} \\\n    --hash=sha256:{_hex(rng, 32)} \\\n    --hash=sha256:{_hex(rng, 32)}",
    ]
    return [_text("\n".join(lines) + "\nrequests-2.31.0.dist-info/RECORD,,\n"), _text("\n".join(req))]


def _sri(rng: random.Random) -> list[dict[str, Any]]:
    lock = {
        "name": "web",
        "lockfileVersion": 3,
        "packages": {
            "node_modules/react": {
                "version": "18.2.0",
                "resolved": "https://registry.npmjs.org/react/-/react-18.2.0.tgz",
                "integrity": f"sha512-{_b64(rng, 64)}",
            },
            "node_modules/zod": {
                "version": "3.22.4",
                "resolved": "https://registry.npmjs.org/zod/-/zod-3.22.4.tgz",
                "integrity": f"sha512-{_b64(rng, 64)}",
            },
        },
    }
    html = (
        f'<script src="https://cdn.example.org/lib.min.js" integrity="sha384-{_b64(rng, 48)}" '
        f'crossorigin="anonymous"></script>\n<link rel="stylesheet" href="/app.css" integrity="sha256-{_b64(rng, 32)}">'
    )
    yarn = (
        f'"lodash@^4.17.21":\n  version "4.17.21"\n  resolved "https://registry.yarnpkg.com/lodash/-/lodash-4.17.21.tgz'
        f'#{_hex(rng, 20)}"\n  integrity sha512-{_b64(rng, 64)}\n'
    )
    return [_text(json.dumps(lock, indent=2)), _text(html), _text(yarn)]


def _csp(rng: random.Random) -> list[dict[str, Any]]:
    nonce = _b64(rng, 18)
    headers = (
        "HTTP/2 200\ncontent-type: text/html; charset=utf-8\n"
        f"content-security-policy: default-src 'self'; script-src 'self' 'nonce-{nonce}' 'strict-dynamic'; "
        f"style-src 'self' 'sha256-{_b64(rng, 32)}'\n"
        f"x-request-id: {_hex(rng, 16)}\n"
    )
    page = f'<script nonce="{nonce}">window.__APP__ = {{"build": "{_hex(rng, 4)}"}};</script>'
    return [_text(headers), _text(page)]


def _x509(rng: random.Random) -> list[dict[str, Any]]:
    der = "MIID" + _b64(rng, 720)[4:]
    pem = f"-----BEGIN CERTIFICATE-----\n{_wrap(der)}\n-----END CERTIFICATE-----\n"
    s_client = (
        "CONNECTED(00000003)\ndepth=2 C = US, O = Example Trust, CN = Example Root CA\nverify return:1\n---\n"
        f"Certificate chain\n 0 s:CN = api.example.com\n   i:C = US, O = Example Trust, CN = Example CA\n---\n"
        f"Server certificate\n{pem}subject=CN = api.example.com\n"
    )
    saml = (
        '<md:EntityDescriptor entityID="https://idp.example.com"><md:IDPSSODescriptor><md:KeyDescriptor use="signing">'
        f"<ds:KeyInfo><ds:X509Data><ds:X509Certificate>{der}</ds:X509Certificate></ds:X509Data></ds:KeyInfo>"
        "</md:KeyDescriptor></md:IDPSSODescriptor></md:EntityDescriptor>"
    )
    return [
        _text(pem),
        _text(s_client),
        _text(saml),
        {"content": [{"type": "text", "text": "ca.crt"}], "structuredContent": {"ca.crt": pem}},
    ]


def _public_keys(rng: random.Random) -> list[dict[str, Any]]:
    pub = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA" + _b64(rng, 240)
    pem = f"-----BEGIN PUBLIC KEY-----\n{_wrap(pub)}\n-----END PUBLIC KEY-----"
    pgp = (
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n"
        f"{_wrap('mQINBG' + _b64(rng, 540))}\n={_b64(rng, 3)}\n-----END PGP PUBLIC KEY BLOCK-----\n"
    )
    jwks = {
        "keys": [
            {"kty": "RSA", "use": "sig", "kid": _hex(rng, 10), "alg": "RS256", "n": _b64(rng, 256, True).rstrip("="),
             "e": "AQAB"},
            {"kty": "EC", "crv": "P-256", "kid": _hex(rng, 8), "x": _b64(rng, 32, True).rstrip("="),
             "y": _b64(rng, 32, True).rstrip("=")},
        ]
    }  # fmt: skip
    ssh = f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_b64(rng, 32)[:43]} deploy@ci"
    return [_text(pem), _text(pgp), _text(json.dumps(jwks)), {"content": [], "structuredContent": jwks}, _text(ssh)]


def _stripe_ids(rng: random.Random) -> list[dict[str, Any]]:
    pi = {
        "id": f"pi_{_b62(rng, 24)}",
        "object": "payment_intent",
        "amount": 2000,
        "currency": "usd",
        "customer": f"cus_{_b62(rng, 14)}",
        "latest_charge": f"ch_{_b62(rng, 24)}",
        "payment_method": f"pm_{_b62(rng, 24)}",
        "invoice": f"in_{_b62(rng, 24)}",
        "client_secret": None,
        "status": "succeeded",
    }
    events = "\n".join(
        f"{_b62(rng, 3)} evt_{_b62(rng, 24)} charge.succeeded ch_{_b62(rng, 24)} txn_{_b62(rng, 24)}" for _ in range(3)
    )
    return [_text(json.dumps(pi, indent=2)), {"content": [], "structuredContent": pi}, _text(events)]


def _s3_ids(rng: random.Random) -> list[dict[str, Any]]:
    host_id = _b64(rng, 56)
    xml = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code><Message>Access Denied</Message>'
        f"<RequestId>{_hex(rng, 8).upper()}</RequestId><HostId>{host_id}</HostId></Error>"
    )
    headers = (
        f"HTTP/1.1 200 OK\nx-amz-id-2: {_b64(rng, 56)}\nx-amz-request-id: {_hex(rng, 8).upper()}\n"
        f'ETag: "{_hex(rng, 16)}"\nx-amz-version-id: {_b62(rng, 32)}\n'
    )
    return [_text(xml), _text(headers), {"content": [], "structuredContent": {"HostId": host_id, "Code": "NoSuchKey"}}]


def _commits(rng: random.Random) -> list[dict[str, Any]]:
    log = "\n".join(
        f"commit {_hex(rng, 20)}\nAuthor: Dev <dev@example.org>\nDate:   Mon Mar 4 10:00:00 2024 +0000\n\n    fix: bump"
        for _ in range(3)
    )
    blame = "\n".join(f"{_hex(rng, 4)} (Dev 2024-01-0{i + 1}) line {i}" for i in range(3))
    return [_text(log), _text(blame)]


def _ulid(rng: random.Random) -> str:
    return "01" + "".join(rng.choice(_CROCKFORD) for _ in range(24))


def _ids(rng: random.Random) -> list[dict[str, Any]]:
    ksuid = "".join(rng.choice(_B62) for _ in range(27))
    rows = [{"id": _ulid(rng), "ksuid": ksuid, "event": "signup"}, {"id": _ulid(rng), "event": "login"}]
    text = "\n".join(f"{_ulid(rng)} job queued run={_ulid(rng)}" for _ in range(3))
    return [_text(json.dumps(rows)), _text(text), _text(f"trace {_hex(rng, 16)} span {_hex(rng, 8)} ksuid {ksuid}")]


def _code_identifiers(rng: random.Random) -> list[dict[str, Any]]:
    snippets = [
        "secret = secret.secret_value\nif secret.is_secret:\n    store(secret)",
        "def login(user, password):\n    password = saslprep(password)\n    return auth.check(user, password)",
        "token = self.token_provider.get_token(scope)\napi_key = settings.API_KEY\n",
        "if is_secret(value) and not secret_manager.exists(secret_name):\n    raise KeyError(secret_name)",
        "const password = await getPassword(userId);\nconst apiKey = config.apiKey;\n",
        "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())\nreturn password_hash",
        "func (c *Client) Token() (string, error) {\n\ttoken, err := c.source.Token()\n"
        "\treturn token.AccessToken, err\n}",
        "self.secret_key = kwargs.pop('secret_key', None)\nself.password = password or os.environ.get('PW')",
    ]
    return [_text(s) for s in snippets]


def _openapi(rng: random.Random) -> list[dict[str, Any]]:
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "Pets", "version": "1.0.0"},
        "components": {
            "securitySchemes": {
                "bearerAuth": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
                "ApiKeyAuth": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
                "basicAuth": {"type": "http", "scheme": "basic"},
                "oauth2": {"type": "oauth2", "flows": {"clientCredentials": {
                    "tokenUrl": "https://auth.example.com/oauth/token", "scopes": {"read": "read pets"}}}},
            }
        },
        "security": [{"bearerAuth": []}, {"ApiKeyAuth": []}],
    }  # fmt: skip
    yaml_text = (
        "components:\n  securitySchemes:\n    bearerAuth:\n      type: http\n      scheme: bearer\n"
        "    ApiKeyAuth:\n      type: apiKey\n      in: header\n      name: X-API-Key\n"
    )
    return [_text(json.dumps(spec, indent=4)), {"content": [], "structuredContent": spec}, _text(yaml_text)]


def _json_schema(rng: random.Random) -> list[dict[str, Any]]:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "apiKey": {"type": "object", "description": "The API key to create",
                       "properties": {"name": {"type": "string"},
                                      "expiresAt": {"type": "string", "format": "date-time"},
                                      "scopes": {"type": "array", "items": {"type": "string"}}},
                       "required": ["name"]},
            "password": {"type": "string", "minLength": 12, "description": "The new password", "format": "password"},
            "token": {"$ref": "#/$defs/Token"},
        },
        "$defs": {"Token": {"type": "string", "pattern": "^[A-Za-z0-9]{40}$"}},
    }  # fmt: skip
    tool = {"tools": [{"name": "create_key", "description": "Create an API key", "inputSchema": schema}]}
    return [_text(json.dumps(schema, indent=2)), {"content": [], "structuredContent": schema}, _text(json.dumps(tool))]


def _urls(rng: random.Random) -> list[dict[str, Any]]:
    sha = _hex(rng, 20)
    lines = [
        f"See https://github.com/acme/widgets/blob/{sha}/src/main.rs#L10-L20",
        f"Source: //github.com/acme/widgets/blob/{sha}/README.md",
        f"https://gitlab.com/group/proj/-/commit/{_hex(rng, 20)}",
        f"https://example.com/download/{_b62(rng, 32)}/report.pdf",
        f"https://raw.githubusercontent.com/acme/widgets/{sha}/LICENSE",
    ]
    return [_text("\n".join(lines)), _text(f"[commit]({lines[0]}) and {lines[2]}")]


def _image_blocks(rng: random.Random) -> list[dict[str, Any]]:
    png = base64.b64encode(_png(rng, 900)).decode()
    audio = base64.b64encode(b"RIFF" + rng.randbytes(600)).decode()
    return [
        {"content": [{"type": "image", "data": png, "mimeType": "image/png"}]},
        {"content": [{"type": "audio", "data": audio, "mimeType": "audio/wav"}]},
        {"content": [{"type": "resource", "resource": {"uri": "file:///tmp/a.png", "mimeType": "image/png",
                                                         "blob": png}}]},
    ]  # fmt: skip


def _data_urls(rng: random.Random) -> list[dict[str, Any]]:
    png = base64.b64encode(_png(rng, 700)).decode()
    woff = base64.b64encode(b"wOF2" + rng.randbytes(500)).decode()
    html = f'<img alt="logo" src="data:image/png;base64,{png}">'
    css = f"@font-face {{ font-family: X; src: url(data:font/woff2;base64,{woff}) format('woff2'); }}"
    md = f"![chart](data:image/png;base64,{png})"
    return [_text(html), _text(css), _text(md)]


def _mime(rng: random.Random) -> list[dict[str, Any]]:
    png = _wrap(base64.b64encode(_png(rng, 1500)).decode(), 76)
    mail = (
        "From: reports@example.com\nTo: team@example.com\nSubject: Weekly chart\nMIME-Version: 1.0\n"
        'Content-Type: multipart/mixed; boundary="b1"\n\n--b1\nContent-Type: text/plain\n\nSee attached.\n\n--b1\n'
        'Content-Type: image/png; name="chart.png"\nContent-Transfer-Encoding: base64\n'
        f'Content-Disposition: attachment; filename="chart.png"\n\n{png}\n--b1--\n'
    )
    pdf = _wrap(base64.b64encode(b"%PDF-1.7\n" + rng.randbytes(800)).decode(), 76)
    return [_text(mail), _text(f"Content-Type: application/pdf\nContent-Transfer-Encoding: base64\n\n{pdf}\n")]


def _manifests(rng: random.Random) -> list[dict[str, Any]]:
    package = {
        "name": "@acme/cli",
        "version": "2.4.1",
        "description": "Command-line tools for the Acme API. Use the `login` command to store your token.",
        "scripts": {"build": "tsc -p .", "test": "vitest run", "prepublishOnly": "npm run build"},
        "dependencies": {"commander": "^11.1.0", "keytar": "^7.9.0"},
    }
    readme = (
        "# acme-cli\n\nInstall with `npm i -g @acme/cli`, then run `acme login` and paste your API token "
        "when asked.\n\n"
        "## Configuration\n\nSet `ACME_TOKEN` in your environment, or put `token = <your token>` in `~/.acme.toml`.\n"
        "Never commit your token. Use the `deploy` tool to ship a build.\n"
    )
    return [_text(json.dumps(package, indent=2)), _text(readme)]


def _lockfiles(rng: random.Random) -> list[dict[str, Any]]:
    cargo = (
        f'[[package]]\nname = "serde"\nversion = "1.0.193"\nsource = "registry+https://github.com/rust-lang/crates.io-index"\n'
        f'checksum = "{_hex(rng, 32)}"\n'
    )
    poetry = (
        f'[[package]]\nname = "idna"\nversion = "3.6"\nfiles = [\n'
        f'    {{file = "idna-3.6.tar.gz", hash = "sha256:{_hex(rng, 32)}"}},\n]\n'
    )
    tf = (
        'provider "registry.terraform.io/hashicorp/aws" {\n  version = "5.31.0"\n  hashes = [\n'
        f'    "h1:{_b64(rng, 32)}",\n    "zh:{_hex(rng, 32)}",\n  ]\n}}\n'
    )
    return [_text(cargo), _text(poetry), _text(tf)]


def _digests(rng: random.Random) -> list[dict[str, Any]]:
    docker = "\n".join(f"ghcr.io/acme/api@sha256:{_hex(rng, 32)}\nDigest: sha256:{_hex(rng, 32)}" for _ in range(2))
    lfs = f"version https://git-lfs.github.com/spec/v1\noid sha256:{_hex(rng, 32)}\nsize 1048576\n"
    nix = f"/nix/store/{''.join(rng.choice('0123456789abcdfghijklmnpqrsvwxyz') for _ in range(32))}-python3-3.11.6"
    return [_text(docker), _text(lfs), _text(nix)]


def _request_ids(rng: random.Random) -> list[dict[str, Any]]:
    log = "\n".join(
        f"2024-03-0{i + 1}T10:00:00Z INFO request_id={_b62(rng, 26)} cf-ray={_hex(rng, 8)}-FRA status=200"
        for i in range(3)
    )
    azure = {"x-ms-request-id": f"{_hex(rng, 4)}-{_hex(rng, 2)}-{_hex(rng, 2)}-{_hex(rng, 2)}-{_hex(rng, 6)}",
             "etag": 'W/"datetime\'2024-01-01T00%3A00%3A00Z\'"'}  # fmt: skip
    return [_text(log), _text(json.dumps(azure))]


def _oauth_discovery(rng: random.Random) -> list[dict[str, Any]]:
    doc = {
        "issuer": "https://auth.example.com",
        "authorization_endpoint": "https://auth.example.com/authorize",
        "token_endpoint": "https://auth.example.com/oauth/token",
        "jwks_uri": "https://auth.example.com/.well-known/jwks.json",
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "private_key_jwt"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
    }
    return [_text(json.dumps(doc, indent=2))]


def _k8s_refs(rng: random.Random) -> list[dict[str, Any]]:
    yaml_text = (
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n      secretKeyRef:\n        name: db-credentials\n"
        "        key: password\n  - name: API_TOKEN\n    valueFrom:\n      secretKeyRef: {name: api, key: token}\n"
    )
    return [_text(yaml_text)]


def _prose(rng: random.Random) -> list[dict[str, Any]]:
    texts = [
        "Passwords must be at least 12 characters long and include a digit. The token expires after 24 hours.",
        "To rotate the secret, open Settings > API keys and click Regenerate; the old key stops working at once.",
        "The password field is required. Token: see the Authentication section. Secret rotation is automatic.",
        "We store only a salted password hash (argon2id); the session token lives in an HttpOnly cookie.",
    ]
    return [_text(t) for t in texts]


def _placeholders(rng: random.Random) -> list[dict[str, Any]]:
    env = (
        "# .env.example\nDATABASE_URL=postgres://user:password@localhost:5432/app\nAPI_KEY=your-api-key-here\n"
        "SECRET_KEY=changeme\nSTRIPE_SECRET_KEY=sk_test_...\nTOKEN=<your token>\n"
    )
    return [_text(env)]


def _source_maps(rng: random.Random) -> list[dict[str, Any]]:
    vlq = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh+/"
    mappings = ";".join(",".join("".join(rng.choice(vlq) for _ in range(rng.randint(4, 8)))
                                 for _ in range(6)) for _ in range(6))  # fmt: skip
    smap = {"version": 3, "file": "app.js", "sources": ["src/app.ts"], "names": ["main"], "mappings": mappings}
    return [_text(json.dumps(smap))]


def _hash_listings(rng: random.Random) -> list[dict[str, Any]]:
    sums = "\n".join(f"{_hex(rng, 32)}  dist/pkg-1.{i}.tar.gz" for i in range(3))
    b64sums = "\n".join(f"sha256-{_b64(rng, 32)}  file{i}" for i in range(2))
    md5 = f"Content-MD5: {_b64(rng, 16)}\nx-goog-hash: crc32c={_b64(rng, 4)},md5={_b64(rng, 16)}"
    return [_text(sums), _text(b64sums), _text(md5)]


def _ipfs_and_chain(rng: random.Random) -> list[dict[str, Any]]:
    cid = "bafybei" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(52))
    tx = "0x" + _hex(rng, 32)
    return [_text(f"pinned {cid}\ntx {tx} confirmed in block 19000000")]


def _fingerprints(rng: random.Random) -> list[dict[str, Any]]:
    ssh = f"256 SHA256:{_b64(rng, 32).rstrip('=')} deploy@ci (ED25519)"
    gpg = (
        "pub   rsa4096 2021-01-01 [SC]\n      "
        + _hex(rng, 20).upper()
        + "\nuid           [ultimate] Dev <dev@example.org>"
    )
    return [_text(ssh), _text(gpg)]


def _webpack(rng: random.Random) -> list[dict[str, Any]]:
    out = "\n".join(f"asset main.{_hex(rng, 10)}.js {rng.randint(10, 900)} KiB [emitted] [immutable]" for _ in range(3))
    return [_text(out)]


def _config_no_secret(rng: random.Random) -> list[dict[str, Any]]:
    cfg = {
        "auth": {"type": "oauth2", "provider": "github", "scopes": ["repo"]},
        "password_policy": {"min_length": 12, "require_digit": True},
        "token_ttl_seconds": 3600,
        "secret_name": "prod/db",
        "api_key_header": "X-API-Key",
    }
    return [_text(json.dumps(cfg, indent=2)), {"content": [], "structuredContent": cfg}]


_CATEGORIES: dict[str, Callable[[random.Random], list[dict[str, Any]]]] = {
    "go_sum": _go_sum,
    "pip_record": _pip_record,
    "sri_integrity": _sri,
    "csp_nonce": _csp,
    "x509_certificate": _x509,
    "public_keys": _public_keys,
    "stripe_object_ids": _stripe_ids,
    "s3_request_ids": _s3_ids,
    "commit_shas": _commits,
    "ulid_ksuid": _ids,
    "code_identifiers": _code_identifiers,
    "openapi_security_schemes": _openapi,
    "json_schema": _json_schema,
    "url_paths": _urls,
    "image_audio_blocks": _image_blocks,
    "data_urls": _data_urls,
    "mime_base64": _mime,
    "manifests": _manifests,
    "lockfiles": _lockfiles,
    "digests": _digests,
    "request_ids": _request_ids,
    "oauth_discovery": _oauth_discovery,
    "k8s_secret_refs": _k8s_refs,
    "prose": _prose,
    "placeholders": _placeholders,
    "source_maps": _source_maps,
    "hash_listings": _hash_listings,
    "ipfs_chain": _ipfs_and_chain,
    "fingerprints": _fingerprints,
    "build_output": _webpack,
    "config_without_secret": _config_no_secret,
}
CATEGORIES = tuple(_CATEGORIES)


def realistic_corpus(rounds: int = 3, seed: int = 20261204) -> list[Item]:
    """`rounds` draws of every category (each draw several items), the same on every run."""
    out: list[Item] = []
    for round_ in range(rounds):
        for name, make in _CATEGORIES.items():
            rng = random.Random(f"{seed}:{name}:{round_}")
            out.extend((name, item) for item in make(rng))
    return out


def digest_of(corpus: list[Item]) -> str:
    """A fingerprint of the corpus (for a test that wants to know it did not change)."""
    return hashlib.sha256(json.dumps(corpus, sort_keys=True).encode()).hexdigest()[:16]


__all__ = ["CATEGORIES", "digest_of", "realistic_corpus"]
