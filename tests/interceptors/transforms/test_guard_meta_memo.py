"""The request guard remembers `_meta` views it found clean (`TransformStages.clean_meta`): a 2026-07-28 client sends
the same envelope (protocol version, client info, capabilities) on every request, and judging it again found the
same nothing at ~5,000 Python opcodes a call. A remembered view must never change a verdict: these tests compare
the stages with a warm memo against fresh stages on the same requests, and check that a secret is refused on every
request that carries it, before and after its envelope was remembered.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors import Phase
from interceptors.registry import Invocation
from interceptors.testing import Embedded, embedded, json_values, secrets
from interceptors.transforms.base import TransformContext
from interceptors.transforms.mutators import TransformStages, _CleanViews
from interceptors.transforms.profiles import STANDARD_TRANSFORMS, STRICT_TRANSFORMS

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
WARM = {"standard": TransformStages(STANDARD_TRANSFORMS), "strict": TransformStages(STRICT_TRANSFORMS)}
PROFILES = {"standard": STANDARD_TRANSFORMS, "strict": STRICT_TRANSFORMS}


def _verdict(stages: TransformStages, meta: Any) -> tuple[bool, tuple[str, ...]]:
    params = {"name": "echo", "arguments": {"text": "hello"}, "_meta": meta}
    verdict = stages.request(Invocation("transforms/request", "tools/call", Phase.REQUEST, {"params": params}))
    return verdict.valid, tuple(message.message for message in verdict.messages or ())


def _metas(secret: Embedded | None, extra: dict[str, Any], token: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {**ENVELOPE, **extra}
    if token is not None:
        meta["progressToken"] = token
    if secret is not None:
        meta["note"] = secret.value
    return meta


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(sorted(WARM)),
    st.none() | embedded(secrets()),
    st.dictionaries(st.text(max_size=6), json_values(max_leaves=4), max_size=2),
    st.none() | st.integers(0, 9) | st.text(max_size=6),
)
@example(profile="standard", secret=None, extra={}, token=None)
def test_a_warm_memo_gives_the_verdict_fresh_stages_give(
    profile: str, secret: Embedded | None, extra: dict[str, Any], token: Any
) -> None:
    meta = _metas(secret, extra, token)
    fresh = _verdict(TransformStages(PROFILES[profile]), meta)
    assert _verdict(WARM[profile], meta) == fresh
    assert _verdict(WARM[profile], meta) == fresh  # the second time, from the memo where it was clean


def test_a_secret_beside_a_remembered_envelope_is_refused_every_time() -> None:
    stages = TransformStages(STANDARD_TRANSFORMS)
    assert _verdict(stages, dict(ENVELOPE)) == (True, ())
    assert len(stages.clean_meta.seen) == 1  # the envelope, remembered
    key = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"  # Stripe's key format, body random-looking
    for _ in range(2):
        valid, messages = _verdict(stages, {**ENVELOPE, "note": key})
        assert not valid and messages and key not in " ".join(messages)
    assert len(stages.clean_meta.seen) == 1  # a refusal is never remembered


def test_the_memo_is_bounded_and_keeps_small_views_only() -> None:
    memo = _CleanViews(size=4, max_bytes=64)
    ctx = TransformContext(direction="input")
    assert memo.key((), {"big": "x" * 100}, ctx) is None
    assert memo.key((), {1: "a non-string key: not JSON as it stands"}, ctx) is None
    for index in range(6):
        key = memo.key((), {"n": index}, ctx)
        assert key is not None
        memo.remember(key)
    assert len(memo.seen) <= 4
