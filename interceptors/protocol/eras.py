"""The two protocol eras, per hop: what a message must carry on each side, and what the hop adds or drops.

2025-11-25 and before (the handshake era): `initialize` once, then requests without an envelope. 2026-07-28
(the modern era): no handshake, `server/discover`, every request carries `_meta` with the protocol version
and client capabilities, and every result carries `resultType` and the server-info stamp. The downstream
and upstream eras are independent; the gateway's router translates at each crossing. Pure (the protocol core).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final

from .messages import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE",
    "LATEST_MODERN",
    "LOG_LEVELS",
    "MODERN_VERSIONS",
    "Era",
    "downstream_result",
    "level_at_least",
    "modern_envelope",
    "negotiate",
    "upstream_params",
]

HANDSHAKE_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE: Final = "2025-11-25"
MODERN_VERSIONS: Final = ("2026-07-28",)
LATEST_MODERN: Final = "2026-07-28"
"""The protocol versions, the one definition every layer reads. The core imports no SDK, so these are written
out; `interceptors_chain/_sdk.py` reads the SDK's published constants, and a test
(tests/interceptors/protocol/test_protocol_core.py)
fails when the two differ (an SDK that serves a new version needs it here too)."""

LOG_LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_HOP_META_KEYS: Final = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, "progressToken"}
)


class Era(StrEnum):
    HANDSHAKE = "handshake"
    MODERN = "modern"


def negotiate(requested: Any) -> str:
    """The version a handshake-era `initialize` settles on: the client's when known, else the latest."""
    return requested if isinstance(requested, str) and requested in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE


def level_at_least(level: Any, minimum: str | None) -> bool:
    """Whether a log at `level` passes a session's `minimum` (an unknown level passes only without a minimum)."""
    if minimum is None:
        return True
    if level not in LOG_LEVELS or minimum not in LOG_LEVELS:
        return False
    return LOG_LEVELS.index(level) >= LOG_LEVELS.index(minimum)


def upstream_params(
    params: dict[str, Any] | None, era: Era, envelope: dict[str, Any], progress_token: int | None
) -> dict[str, Any] | None:
    """Downstream params for the upstream hop: the downstream's envelope and token out, the hop's own in."""
    if params is None and era is Era.HANDSHAKE and progress_token is None:
        return None
    out = dict(params) if params is not None else {}
    meta = out.get("_meta")
    kept = {k: v for k, v in meta.items() if k not in _HOP_META_KEYS} if isinstance(meta, dict) else {}
    if era is Era.MODERN:
        kept.update(envelope)
    if progress_token is not None:
        kept["progressToken"] = progress_token
    if kept:
        out["_meta"] = kept
    else:
        out.pop("_meta", None)
    return out


def downstream_result(
    result: dict[str, Any], era: Era, server_info: dict[str, Any], cacheable: bool = False
) -> dict[str, Any]:
    """An upstream result in the session's era: the modern stamp added (with the caching hints a `cacheable`
    method's result needs: immediately stale and private, the safe default), or removed for a handshake client."""
    meta = result.get("_meta")
    if era is Era.MODERN:
        out = dict(result) if "resultType" in result else {"resultType": "complete", **result}
        if cacheable:
            out.setdefault("cacheScope", "private")
            out.setdefault("ttlMs", 0)
        stamped = dict(meta) if isinstance(meta, dict) else {}
        stamped.setdefault(SERVER_INFO_META_KEY, server_info)
        out["_meta"] = stamped
        return out
    if "resultType" not in result and not (isinstance(meta, dict) and SERVER_INFO_META_KEY in meta):
        return result
    out = {key: value for key, value in result.items() if key != "resultType"}
    if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
        rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
        if rest:
            out["_meta"] = rest
        else:
            del out["_meta"]
    return out


def modern_envelope(params: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """(version, problem) of a modern request's envelope: the problem is None when it is complete."""
    meta = params.get("_meta") if params is not None else None
    if not isinstance(meta, dict):
        return None, "params._meta must carry the protocol version and client capabilities"
    version = meta.get(PROTOCOL_VERSION_META_KEY)
    if not isinstance(version, str):
        return None, "the protocol-version envelope value must be a string"
    if not isinstance(meta.get(CLIENT_CAPABILITIES_META_KEY), dict):
        return version, "params._meta is missing the client capabilities"
    return version, None
