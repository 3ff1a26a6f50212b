"""The gateway's sans-IO message router: bytes and chain outcomes in, actions out (see doc/ROUTER.md)."""

from __future__ import annotations

from interceptors.protocol.eras import Era
from interceptors.protocol.messages import Kind, Message, parse

from .actions import (
    Action,
    AnswerLocally,
    CatalogChanged,
    ChainBlocked,
    ChainOutcome,
    ChainPassed,
    Close,
    Dropped,
    RequestState,
    RunChain,
    SendDownstream,
    SendUpstream,
)
from .channels import Channel
from .state import MissingAnswer, Router, RouterConfig, UpstreamPhase

__all__ = [
    "Action",
    "AnswerLocally",
    "CatalogChanged",
    "ChainBlocked",
    "ChainOutcome",
    "ChainPassed",
    "Channel",
    "Close",
    "Dropped",
    "Era",
    "Kind",
    "Message",
    "MissingAnswer",
    "RequestState",
    "Router",
    "RouterConfig",
    "RunChain",
    "SendDownstream",
    "SendUpstream",
    "UpstreamPhase",
    "parse",
]
