"""Interceptors the gateway tests load with `--registry tests.servers.gateway_registry:registry`.

- `gw/deny`: a request validator on tools/call that rejects arguments containing `DENY_WORD`.
- `gw/shout`: a request mutator on tools/call that upper-cases a `text` argument starting with `SHOUT`.
- `gw/redact`: a response mutator on every operation that replaces `MARKER` in any string with `REDACTED`,
  so it reaches results, errors, progress and log messages alike (they are all result-shaped).
- `gw/block`: a response validator on tools/call that rejects any payload still containing `BLOCK_WORD`.
"""

from __future__ import annotations

from typing import Any

from interceptors import Invocation, Mutation, Registry, Verdict
from tests.servers.upstream_server import MARKER

DENY_WORD = "forbidden"
SHOUT = "shout:"
BLOCK_WORD = "TOPSECRET"
REDACTED = "[REDACTED]"


def _replace(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace(MARKER, REDACTED)
    if isinstance(value, list):
        return [_replace(item) for item in value]
    if isinstance(value, dict):
        return {key: _replace(item) for key, item in value.items()}
    return value


def _contains(value: Any, word: str) -> bool:
    if isinstance(value, str):
        return word in value
    if isinstance(value, list):
        return any(_contains(item, word) for item in value)
    if isinstance(value, dict):
        return any(_contains(item, word) for item in value.values())
    return False


def build() -> Registry:
    registry = Registry()

    @registry.validator("gw/deny", events="tools/call", phase="request")
    def deny(invocation: Invocation) -> Verdict:
        arguments = (invocation.payload.get("params") or {}).get("arguments") or {}
        if _contains(arguments, DENY_WORD):
            return Verdict.deny(f"arguments contain {DENY_WORD!r}")
        return Verdict.allow()

    @registry.mutator("gw/shout", events="tools/call", phase="request")
    def shout(invocation: Invocation) -> Mutation:
        params = invocation.payload.get("params") or {}
        arguments = params.get("arguments") or {}
        text = arguments.get("text")
        if not isinstance(text, str) or not text.startswith(SHOUT):
            return Mutation.unchanged()
        return Mutation({**invocation.payload, "params": {**params, "arguments": {**arguments, "text": text.upper()}}})

    @registry.mutator("gw/redact", events="*", phase="response")
    def redact(invocation: Invocation) -> Mutation:
        if not _contains(invocation.payload, MARKER):
            return Mutation.unchanged()
        return Mutation(_replace(invocation.payload))

    @registry.validator("gw/block", events="tools/call", phase="response")
    def block(invocation: Invocation) -> Verdict:
        if _contains(invocation.payload, BLOCK_WORD):
            return Verdict.deny("the answer carries a blocked word")
        return Verdict.allow()

    return registry


registry = build()
