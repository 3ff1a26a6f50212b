"""A realistic benign corpus: tool results holding no secret that a redaction policy must leave alone.

Each category is the kind of output a model reads every day and that looks secret-ish to a naive scanner:
SRI integrity hashes, Kubernetes `secretKeyRef` references, git SHAs, UUIDs, content hashes under hash-like
keys, pagination cursors, `auth` configuration without secrets, cookie name lists, e-mail signatures, SSH
public keys, container digests, code that reads secrets from the environment, logs, prose. Generated from a
seed, so every run measures the same items: `benign_corpus(count, seed)` gives `(category, tool result)`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import uuid
from collections.abc import Callable
from typing import Any

_WORDS = (
    "deploy", "service", "cluster", "request", "handler", "billing", "search", "index", "worker", "queue",
    "backup", "replica", "gateway", "ingest", "report", "invoice", "customer", "order", "catalog", "session",
)  # fmt: skip
_NAMES = ("Jane Doe", "Ravi Patel", "Chen Wei", "Amara Okafor", "Lukas Schmidt", "Sofia Rossi")


def _hex(rng: random.Random, size: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(size))


def _b64(rng: random.Random, size: int, urlsafe: bool = False) -> str:
    raw = bytes(rng.getrandbits(8) for _ in range(size))
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _word(rng: random.Random) -> str:
    return rng.choice(_WORDS)


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _structured(data: dict[str, Any], *, as_text: bool = False) -> dict[str, Any]:
    if as_text:
        return _text(json.dumps(data, indent=2))
    return {"content": [{"type": "text", "text": json.dumps(data)}], "structuredContent": data}


def _sri(rng: random.Random) -> dict[str, Any]:
    algo, size = rng.choice([("sha256", 32), ("sha384", 48), ("sha512", 64)])
    digest = f"{algo}-{_b64(rng, size)}"
    name = _word(rng) + "-" + _word(rng)
    if rng.random() < 0.5:
        lock = {
            "packages": {
                f"node_modules/{name}": {
                    "version": f"{rng.randint(1, 9)}.{rng.randint(0, 20)}.0",
                    "resolved": f"https://registry.npmjs.org/{name}/-/{name}-1.0.0.tgz",
                    "integrity": digest,
                }
            }
        }
        return _structured(lock, as_text=rng.random() < 0.5)
    return _text(
        f'<script src="https://cdn.example.com/{name}.min.js" integrity="{digest}" crossorigin="anonymous"></script>'
    )


def _secret_key_ref(rng: random.Random) -> dict[str, Any]:
    env = [
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": f"{_word(rng)}-db", "key": "password"}}},
        {"name": "API_TOKEN", "valueFrom": {"secretKeyRef": {"name": f"{_word(rng)}-api", "key": "token"}}},
        {"name": "LOG_LEVEL", "value": "info"},
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{_word(rng)}-{_hex(rng, 5)}"},
        "spec": {"containers": [{"name": _word(rng), "image": f"ghcr.io/acme/{_word(rng)}:1.4.2", "env": env}]},
    }
    return _structured(pod, as_text=rng.random() < 0.4)


def _git(rng: random.Random) -> dict[str, Any]:
    sha, parent, tree = _hex(rng, 40), _hex(rng, 40), _hex(rng, 40)
    if rng.random() < 0.5:
        return _text(
            f"commit {sha}\nMerge: {parent[:7]} {_hex(rng, 7)}\nAuthor: {rng.choice(_NAMES)}\n\n"
            f"    Fix {_word(rng)} retry ({sha[:12]})\n"
        )
    return _structured(
        {
            "sha": sha,
            "node_id": "C_kwDO" + _b64(rng, 12, urlsafe=True).rstrip("="),
            "commit": {"tree": {"sha": tree}, "message": f"Bump {_word(rng)}"},
            "parents": [{"sha": parent}],
        }
    )


def _uuids(rng: random.Random) -> dict[str, Any]:
    rows = [
        {"id": _uuid(rng), "request_id": _uuid(rng), "trace_id": _hex(rng, 32), "span_id": _hex(rng, 16)}
        for _ in range(rng.randint(1, 4))
    ]
    return _structured({"items": rows})


def _hashes(rng: random.Random) -> dict[str, Any]:
    data = {
        "file": f"{_word(rng)}.tar.gz",
        "sha256": _hex(rng, 64),
        "md5": _hex(rng, 32),
        "checksum": "sha256:" + _hex(rng, 64),
        "etag": '"' + _hex(rng, 32) + '"',
        "digest": _b64(rng, 32),
        "content_hash": _b64(rng, 32, urlsafe=True).rstrip("="),
        "fingerprint": ":".join(_hex(rng, 2) for _ in range(16)),
    }
    if rng.random() < 0.3:
        return _text(f"sha256sum: {data['sha256']}  {data['file']}\nETag: {data['etag']}")
    return _structured(data)


def _cursors(rng: random.Random) -> dict[str, Any]:
    token = _b64(rng, rng.choice([24, 48, 96]), urlsafe=True).rstrip("=")
    data = {
        "items": [{"name": _word(rng)} for _ in range(2)],
        rng.choice(
            ["nextPageToken", "next_page_token", "cursor", "nextCursor", "continuationToken", "pageToken"]
        ): token,
    }
    return _structured(data)


def _auth_config(rng: random.Random) -> dict[str, Any]:
    data = {
        "auth": {
            "type": rng.choice(["oauth2", "oidc", "none", "basic"]),
            "enabled": rng.random() < 0.5,
            "scopes": ["read:" + _word(rng), "write:" + _word(rng)],
            "issuer": "https://login.example.com/",
            "audience": _word(rng) + "-api",
        },
        "token_type": "Bearer",
        "expires_in": 3600,
        "max_tokens": rng.randint(256, 4096),
        "tokenizer": "cl100k_base",
        "password_policy": {"min_length": 12, "require_symbols": True},
    }
    return _structured(data, as_text=rng.random() < 0.3)


def _cookies(rng: random.Random) -> dict[str, Any]:
    return _structured(
        {
            "cookies": rng.sample(["session_id", "csrftoken", "_ga", "locale", "theme", "consent"], 3),
            "cookie_policy": "strict",
            "set_cookie_samesite": "Lax",
        }
    )


def _signature(rng: random.Random) -> dict[str, Any]:
    name = rng.choice(_NAMES)
    return _structured(
        {
            "from": "Support Team",
            "subject": f"Your {_word(rng)} request",
            "signature": f"Best regards,\n{name}\nCustomer Success, ACME Corp",
        }
    )


def _ssh_public(rng: random.Random) -> dict[str, Any]:
    key = "AAAAC3NzaC1lZDI1NTE5AAAAI" + _b64(rng, 32).rstrip("=")
    rsa = "AAAAB3NzaC1yc2EAAAADAQABAAABgQ" + _b64(rng, 120)
    line = rng.choice([f"ssh-ed25519 {key} deploy@{_word(rng)}", f"ssh-rsa {rsa} ci@{_word(rng)}"])
    return _text(f"authorized_keys:\n{line}\n")


def _digests(rng: random.Random) -> dict[str, Any]:
    image = f"ghcr.io/acme/{_word(rng)}@sha256:{_hex(rng, 64)}"
    return _text(f"Pulled {image}\nStatus: Downloaded newer image for {_word(rng)}:latest")


def _code(rng: random.Random) -> dict[str, Any]:
    snippets = [
        'password = os.environ["DB_PASSWORD"]\ntoken = get_token(scope="read")',
        "const apiKey = process.env.STRIPE_SECRET_KEY;\nif (!apiKey) throw new Error('missing key');",
        "export AWS_PROFILE=dev\naws s3 ls s3://acme-logs/2024/06/ --recursive",
        "def verify_signature(payload, signature, secret):\n    return hmac.compare_digest(signature, sign(payload))",
        "curl -sS https://api.example.com/v1/items -H 'Accept: application/json'",
        "kubectl create secret generic db --from-literal=password=$(cat /run/secrets/db)",
        "mysql -u app -p -h db.internal shop < schema.sql",
    ]
    return _text(rng.choice(snippets))


def _logs(rng: random.Random) -> dict[str, Any]:
    lines = []
    for _ in range(rng.randint(3, 8)):
        level = rng.choice(["INFO", "WARN", "DEBUG"])
        lines.append(
            f"2024-06-{rng.randint(10, 28)}T12:{rng.randint(10, 59)}:00Z {level} {_word(rng)} "
            f"request_id={_uuid(rng)} duration_ms={rng.randint(1, 900)} "
            f"path=/v1/{_word(rng)}/{rng.randint(1, 999)}"
        )
    return _text("\n".join(lines))


def _prose(rng: random.Random) -> dict[str, Any]:
    text = (
        f"The {_word(rng)} service rotates its API keys every {rng.randint(30, 90)} days; tokens are stored in "
        f"the vault and never logged. Passwords must be at least 12 characters. See the runbook for the "
        f"{_word(rng)} {_word(rng)} procedure (ticket OPS-{rng.randint(100, 9999)})."
    )
    return _text(text)


def _identifiers(rng: random.Random) -> dict[str, Any]:
    names = [
        "".join(w.capitalize() for w in rng.sample(list(_WORDS), 4)) + "Factory",
        "_".join(rng.sample(list(_WORDS), 5)),
        f"/usr/lib/python3.11/site-packages/{_word(rng)}/{_word(rng)}.py",
        f"s3://acme-{_word(rng)}/{rng.randint(2020, 2025)}/{_word(rng)}/part-{_hex(rng, 8)}.parquet",
        "https://docs.example.com/" + "/".join(rng.sample(list(_WORDS), 3)) + "?page=2&sort=asc",
        f"{_word(rng)}-{_word(rng)}-{_hex(rng, 9)}-{_b64(rng, 4, urlsafe=True)[:5].lower()}",
        "".join(w.upper() for w in rng.sample(list(_WORDS), 1))
        + "_"
        + "_".join(w.upper() for w in rng.sample(list(_WORDS), 3))
        + f"_V{rng.randint(2, 9)}",
        "".join(w.capitalize() for w in rng.sample(list(_WORDS), 3)) + f"Test{rng.randint(10, 99)}Case",
        rng.choice(["x86_64-unknown-linux-gnu", "aarch64-apple-darwin", "manylinux2014_x86_64"]),
        f"{_word(rng)}{rng.randint(1, 9)}.{_word(rng)}.svc.cluster.local",
    ]
    return _structured({"symbols": names, "version": f"{rng.randint(1, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"})


def _image(rng: random.Random) -> dict[str, Any]:
    png = b"\x89PNG\r\n\x1a\n" + hashlib.sha256(str(rng.random()).encode()).digest() * 4
    return {
        "content": [
            {"type": "text", "text": "rendered chart"},
            {"type": "image", "data": base64.b64encode(png).decode(), "mimeType": "image/png"},
        ]
    }


CATEGORIES: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "sri_integrity": _sri, "secret_key_ref": _secret_key_ref, "git_sha": _git, "uuid": _uuids,
    "hash_keys": _hashes, "pagination_cursor": _cursors, "auth_config": _auth_config, "cookie_names": _cookies,
    "email_signature": _signature, "ssh_public_key": _ssh_public, "image_digest": _digests, "code": _code,
    "logs": _logs, "prose": _prose, "identifiers": _identifiers, "binary_image": _image,
}  # fmt: skip
"""Each benign category and its generator."""


def benign_corpus(count: int = 1200, seed: int = 20261201) -> list[tuple[str, dict[str, Any]]]:
    """`count` benign tool results, spread evenly over the categories, the same ones for a given seed."""
    rng = random.Random(seed)
    names = list(CATEGORIES)
    return [(names[i % len(names)], CATEGORIES[names[i % len(names)]](rng)) for i in range(count)]


def altered(before: dict[str, Any], after: Any) -> bool:
    """Whether a benign result came out changed (our own report in `_meta` aside)."""
    if not isinstance(after, dict):
        return True
    strip = {k: v for k, v in after.items() if k != "_meta"}
    original = {k: v for k, v in before.items() if k != "_meta"}
    return strip != original


__all__ = ["CATEGORIES", "altered", "benign_corpus"]
