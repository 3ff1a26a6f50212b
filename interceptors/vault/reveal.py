"""`reveal_token`: what a pseudonym stands for, for callers the policy grants the `reveal` capability.

Every call is audited through a callback *before* the answer is returned (a failing audit means no
answer), and logged as a warning. Neither ever contains the revealed value: they carry the principal, the
namespace, the outcome, the entity or the number of tokens reversed, and a keyed hash of the pseudonym.
Lookups happen in the caller's namespace only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import InterceptorsError
from .stages import Depseudonymizer
from .store import Pair
from .vault import TokenVault

logger = logging.getLogger("interceptors.vault.reveal")

MAX_TOKEN_CHARS = 20_000
TOOL_NAME = "reveal_token"
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "token": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_TOKEN_CHARS,
            "description": "A pseudonym, or text containing pseudonyms.",
        }
    },
    "required": ["token"],
    "additionalProperties": False,
}
TOOL_DESCRIPTION = "Reveal the real value behind a pseudonym (audited; needs the reveal capability)."


@dataclass(frozen=True, slots=True)
class RevealRecord:
    """What the audit callback receives. Holds no revealed value and not the pseudonym itself."""

    principal: str | None
    namespace: str
    found: bool
    exact: bool
    entity: str | None
    replaced: int
    token_hash: str


RevealAudit = Callable[[RevealRecord], None]


class RevealError(InterceptorsError, ValueError):
    """A bad `reveal_token` argument (the message never quotes it)."""


def reveal_token(
    vault: TokenVault,
    token: Any,
    *,
    principal: str | None,
    audit: RevealAudit,
    aliases: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`{pseudonym, found, value, entity_type}` for an exact token; otherwise `{pseudonym, found, value,
    replaced}` for text with tokens (or aliases) inside; `value` is None when nothing was found."""
    if not isinstance(token, str) or not 1 <= len(token) <= MAX_TOKEN_CHARS:
        raise RevealError(f"token: must be a string of 1 to {MAX_TOKEN_CHARS} characters")
    namespace = vault.namespace_for(principal)
    token_hash = vault.hash_value(token, "reveal_token", 16)
    entry = vault.entry(token, namespace)
    if entry is not None:
        record = RevealRecord(principal, namespace, True, True, entry.entity, 1, token_hash)
        _audit(audit, record)
        return {"pseudonym": token, "found": True, "value": entry.value, "entity_type": entry.entity}
    pairs: list[Pair] = []
    text = Depseudonymizer(vault, aliases).text(token, namespace, pairs)
    found = bool(pairs)
    record = RevealRecord(principal, namespace, found, False, None, len(pairs), token_hash)
    _audit(audit, record)
    return {"pseudonym": token, "found": found, "value": text if found else None, "replaced": len(pairs)}


def _audit(audit: RevealAudit, record: RevealRecord) -> None:
    audit(record)  # first: an audit that fails stops the reveal
    outcome = f"entity={record.entity}" if record.exact else f"reversed={record.replaced}"
    logger.warning(
        "reveal_token principal=%r namespace=%r found=%s %s token_hash=%s",
        record.principal,
        record.namespace,
        record.found,
        outcome,
        record.token_hash,
    )


class RevealTool:
    """`reveal_token` bound to a vault and an audit callback, for a gateway to offer as a tool."""

    name = TOOL_NAME
    description = TOOL_DESCRIPTION
    input_schema = INPUT_SCHEMA

    def __init__(self, vault: TokenVault, audit: RevealAudit, aliases: Mapping[str, str] | None = None) -> None:
        self.vault = vault
        self.audit = audit
        self.aliases = aliases

    def __call__(self, arguments: Mapping[str, Any], principal: str | None) -> dict[str, Any]:
        if not isinstance(arguments, Mapping) or set(arguments) - {"token"}:
            raise RevealError("arguments: exactly one argument, token, is accepted")
        return reveal_token(
            self.vault, arguments.get("token"), principal=principal, audit=self.audit, aliases=self.aliases
        )
