"""The registry the stdio and HTTP host scripts serve (shared so the transport tests agree on it)."""

from __future__ import annotations

from typing import Any

import anyio

from interceptors import Invocation, Mutation, Registry, Verdict

DENY_WORD = "forbidden"
SLOW_EVENT = "slow/op"


def _text(payload: Any) -> str:
    if isinstance(payload, dict):
        arguments = payload.get("arguments")
        if isinstance(arguments, dict) and isinstance(arguments.get("text"), str):
            return arguments["text"]
    return ""


def build_registry() -> Registry:
    """A validator (both phases), a request mutator, and a slow async validator on its own event."""
    registry = Registry()

    @registry.validator("host/deny-word", events=["tools/call"], phase="both")
    def deny_word(inv: Invocation) -> Verdict:
        if DENY_WORD in _text(inv.payload).lower():
            return Verdict.deny(f"contains {DENY_WORD!r}", path="/arguments/text")
        return Verdict.allow()

    @registry.mutator("host/upper", events=["tools/call"], phase="request")
    def upper(inv: Invocation) -> Mutation:
        text = _text(inv.payload)
        if not text or text == text.upper():
            return Mutation.unchanged()
        payload = dict(inv.payload)
        payload["arguments"] = {**payload["arguments"], "text": text.upper()}
        return Mutation(payload)

    @registry.validator("host/slow", events=[SLOW_EVENT], phase="request")
    async def slow(inv: Invocation) -> Verdict:
        await anyio.sleep(30)  # far beyond any timeout the tests set: they prove timeouts with wide bounds
        return Verdict.allow()

    return registry
