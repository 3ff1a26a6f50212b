"""The vault key: where it comes from, the per-purpose sub-keys derived from it, and its public id.

The raw key is read once (policy, environment variable, or 32 random bytes) and immediately turned into
sub-keys with HMAC-SHA256, one per purpose, so no component ever holds a key it does not need. Only a short
key id (12 hex characters of its own sub-key) is ever shown: in `repr`, errors, logs and files.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from typing import Literal

from ..errors import InterceptorsError

DEFAULT_KEY_ENV = "MCP_INTERCEPTORS_VAULT_KEY"
"""The variable read when the policy gives no key (the same default the policy engine uses)."""

KeySource = Literal["config", "env", "random"]

PURPOSES = (
    "tokenize",
    "prefix-preserving",
    "hash",
    "file-encryption",
    "store-encryption",
    "store-index",
    "key-id",
)


class VaultKeyError(InterceptorsError, ValueError):
    """A key that cannot be used. The message never contains the key."""


def _label(purpose: str) -> bytes:
    # `mcp-interceptors/hash` is also the transforms' KeyedHasher label: both give the same `hash` digests.
    return f"mcp-interceptors/{purpose}".encode()


def resolve_raw_key(
    key: bytes | str | None, key_env: str | None = DEFAULT_KEY_ENV, *, required: bool = False
) -> tuple[bytes, KeySource]:
    """The raw key and where it came from: the argument, else `$key_env`, else 32 random bytes.

    `required`: no random fallback. A policy that names `key_env` wants that key; silently using a random one
    would change every pseudonym at each restart (and make a vault file unreadable), so it is an error."""
    if key is not None:
        if isinstance(key, str):
            raw = key.encode("utf-8")
        elif isinstance(key, bytes | bytearray | memoryview):
            raw = bytes(key)
        else:
            raise VaultKeyError("a vault key must be text or bytes")
        if not raw:
            raise VaultKeyError("a vault key must not be empty")
        return raw, "config"
    if key_env:
        value = os.environ.get(key_env)
        if value:
            return value.encode("utf-8"), "env"
    if required:
        if key_env:
            raise VaultKeyError(
                f"the vault key variable {key_env} is not set (or empty): set it, or remove vault.key_env to use "
                "a random key for this process only"
            )
        raise VaultKeyError("a vault key is required and none was given")
    return secrets.token_bytes(32), "random"


@dataclass(frozen=True, slots=True)
class VaultKeys:
    """Sub-keys per purpose. The raw key is not kept; `repr` shows only the key id."""

    key_id: str
    source: KeySource
    _subkeys: dict[str, bytes] = field(repr=False, compare=False)

    @classmethod
    def derive(
        cls, key: bytes | str | None = None, key_env: str | None = DEFAULT_KEY_ENV, *, required: bool = False
    ) -> VaultKeys:
        raw, source = resolve_raw_key(key, key_env, required=required)
        subkeys = {p: hmac.new(raw, _label(p), hashlib.sha256).digest() for p in PURPOSES}
        key_id = subkeys["key-id"].hex()[:12]
        return cls(key_id, source, subkeys)

    def subkey(self, purpose: str) -> bytes:
        try:
            return self._subkeys[purpose]
        except KeyError:
            raise VaultKeyError(f"no sub-key for purpose {purpose!r}") from None

    def __repr__(self) -> str:
        return f"VaultKeys(key_id={self.key_id!r}, source={self.source!r})"

    def __str__(self) -> str:
        return repr(self)

    def __reduce__(self) -> tuple[object, ...]:  # never pickle key material by accident
        raise TypeError("vault keys cannot be pickled")


def fields_message(*parts: str | bytes) -> bytes:
    """An unambiguous byte encoding of several fields (each length-prefixed), for MAC inputs."""
    out = bytearray()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass") if isinstance(part, str) else part
        out += len(data).to_bytes(4, "big")
        out += data
    return bytes(out)
