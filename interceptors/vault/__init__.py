"""Reversible pseudonymisation: the keyed token vault and its interceptors.

Pure Python on the core (stdlib, orjson, `cryptography`); never imports an MCP SDK. The Redis store is an
optional extra, imported only when a `RedisStore` is built.

- `TokenVault`: deterministic, format-preserving tokens per (key, namespace, entity, value), reversal of
  exact tokens and of tokens inside text, TTL, encrypted persistence, import and export. It implements the
  transforms' `Pseudonymizer` protocol.
- `vault_registry(vault)`: the request mutator that reverses tokens in what a model sends, and the response
  mutator that re-pseudonymises whatever a tool echoes back.
- `reveal_token` / `RevealTool`: the audited reveal tool.
- `MemoryStore` (default) and `RedisStore` (shared between processes) behind `VaultStore`.
"""

from __future__ import annotations

from .formats import FORMATTERS, shape_entity
from .keys import DEFAULT_KEY_ENV, VaultKeyError, VaultKeys
from .persist import FILE_FORMAT, VaultFileError
from .redis_store import RedisStore
from .reveal import INPUT_SCHEMA, TOOL_NAME, RevealError, RevealRecord, RevealTool, reveal_token
from .stages import Depseudonymizer, Repseudonymizer, VaultStages, operation_key, vault_registry
from .store import Entry, MemoryStore, StoreKeys, VaultStore
from .vault import ANONYMOUS, GLOBAL, TokenVault, VaultConfig, VaultError, canonical_entity

__all__ = [
    "ANONYMOUS",
    "DEFAULT_KEY_ENV",
    "FILE_FORMAT",
    "FORMATTERS",
    "GLOBAL",
    "INPUT_SCHEMA",
    "TOOL_NAME",
    "Depseudonymizer",
    "Entry",
    "MemoryStore",
    "RedisStore",
    "Repseudonymizer",
    "RevealError",
    "RevealRecord",
    "RevealTool",
    "StoreKeys",
    "TokenVault",
    "VaultConfig",
    "VaultError",
    "VaultFileError",
    "VaultKeyError",
    "VaultKeys",
    "VaultStages",
    "VaultStore",
    "canonical_entity",
    "operation_key",
    "reveal_token",
    "shape_entity",
    "vault_registry",
]
