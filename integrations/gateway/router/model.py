"""What the router remembers about the upstream, each session, each request in flight and each request the
upstream sent a client: plain records, changed only by the router (`state.py`)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from interceptors.protocol.eras import Era
from interceptors.protocol.messages import RequestId

from .actions import RequestState, SessionId
from .channels import Channel
from .subscriptions import Listen


class HoldBack(Protocol):
    """Decides when each message of a stream goes on and with which context (`StreamHoldBack`); never its text."""

    def push(self, message: Any, text: str) -> list[Any]: ...
    def flush(self) -> list[Any]: ...


class UpstreamPhase(StrEnum):
    IDLE = "idle"
    DISCOVERING = "discovering"
    INITIALIZING = "initializing"
    READY = "ready"
    CLOSED = "closed"


@dataclass(slots=True)
class Upstream:
    phase: UpstreamPhase = UpstreamPhase.IDLE
    era: Era = Era.HANDSHAKE
    version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None
    log_level: str | None = None
    restarting: bool = False
    """Closed, and the shell is starting a new one (`--restart-upstream`): requests meanwhile are told so."""


@dataclass(slots=True)
class Session:
    id: SessionId
    context: Any
    principal: Hashable
    era: Era | None = None
    version: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)
    initialized: bool = False
    probing: bool = False
    """Modern only by `server/discover` so far: a client whose probe timed out may still fall back to
    `initialize` (the 2026-07-28 era's own rule), and then the session is a handshake one."""
    log_level: str | None = None
    listens: dict[RequestId, Listen] = field(default_factory=dict)
    """Open `subscriptions/listen` streams (2026-07-28), by the listen request's id."""
    next_outgoing: int = 0


@dataclass(slots=True)
class Pending:
    """One downstream request, from its request chain to its final reply (the `state` rides every pass)."""

    session: SessionId
    client_id: RequestId
    method: str
    era: Era
    state: RequestState
    params: dict[str, Any] | None
    upstream_id: int | None = None
    client_token: RequestId | None = None
    upstream_token: int | None = None
    log_level: str | None = None
    cancelled: bool = False
    answered: bool = False  # the upstream replied (its response chain may still be running)
    progress_seen: int = 0  # progress notifications the upstream sent for it (the shell's clock may reset)
    streams: dict[Channel, tuple[HoldBack, dict[str, Any]]] = field(default_factory=dict)
    """Per streaming channel: its hold-back and the last message's params (the shape of a final flush)."""


@dataclass(slots=True)
class Outgoing:
    """A request the upstream sent the client, relayed to `session` as `down_id`."""

    session: SessionId
    down_id: str
    upstream_id: RequestId
    method: str
    related: RequestId | None
