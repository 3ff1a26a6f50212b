"""The secretless redactor: replaces verbatim secrets in any string of a payload with opaque handles."""

from __future__ import annotations

from typing import Any

from ..codec import dumps_str
from ..outcomes import Mutation
from ..registry import Invocation
from .secrets import find_secrets


def fnv1a32(text: str) -> str:
    """FNV-1a over UTF-16 code units, as 8 lowercase hex digits (stable across languages)."""
    value = 0x811C9DC5
    data = text.encode("utf-16-le", "surrogatepass")
    for index in range(0, len(data), 2):
        value ^= data[index] | (data[index + 1] << 8)
        value = (value * 0x01000193) & 0xFFFFFFFF
    return f"{value:08x}"


def secret_handle(format_id: str, secret: str) -> str:
    """A handle no secret format matches, so a guard downstream sees no secret."""
    return f"<mcp:secret-ref:{format_id}:{fnv1a32(secret)}>"


class SecretlessRedactor:
    """Stateless mutator: object keys and structure stay, string values lose their secrets."""

    def __call__(self, invocation: Invocation) -> Mutation:
        payload = invocation.payload
        hits = find_secrets(dumps_str(payload)) if payload is not None else []
        if not hits:
            return Mutation.unchanged()
        formats = list(dict.fromkeys(format_id for format_id, _ in hits))
        return Mutation(self.redact(payload), True, {"redacted": len(hits), "formats": formats})

    def redact(self, value: Any) -> Any:
        if isinstance(value, str):
            for format_id, secret in find_secrets(value):
                value = value.replace(secret, secret_handle(format_id, secret))
            return value
        if isinstance(value, dict):
            return {key: self.redact(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.redact(item) for item in value]
        return value
