"""What happens when a chain answers: one named record per kind of chain run the router starts.

The router hands the shell a `RunChain` and keeps, under its ticket, one of these records; `chain_done` looks
the record's type up in `Router.RESUME` and calls that transition with the record and the outcome. A record
says everything the transition needs, so a reader (or a debugger, or a test) sees what each waiting ticket
will do: forward a request upstream, answer a client, deliver a notification, relay a request to a client,
answer the upstream.

Records are frozen: what they refer to (a `Pending`, a `Slot`) is the router's live state, changed by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from interceptors._fastinit import fast_init
from interceptors.protocol.messages import RequestId

from .actions import SessionId
from .channels import Channel
from .model import Pending, Session
from .slots import Slot, StreamKey


@fast_init
@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """A client's request passed its request chain: it goes upstream with the params the chain left
    (through the method's send handler: a shared subscription may be answered at once)."""

    pending: Pending


@fast_init
@dataclass(frozen=True, slots=True)
class AnswerClient:
    """The upstream's result passed its response chain: it is the client's reply. `subscribed`: the URI of a
    `resources/subscribe`, held only once the client is told (updates that waited are sent after the reply)."""

    pending: Pending
    subscribed: str | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class AnswerClientError:
    """The upstream's error passed the error channel's chain: the client gets its code, and its message and
    data as the chain left them."""

    pending: Pending
    error: dict[str, Any]


@fast_init
@dataclass(frozen=True, slots=True)
class AnswerFromRouter:
    """A result the router made itself (`initialize`, `server/discover`) passed its chain: it fills `slot`."""

    session: Session
    client_id: RequestId
    method: str
    slot: Slot
    key: StreamKey


@fast_init
@dataclass(frozen=True, slots=True)
class DeliverNotification:
    """A notification for one session passed its chain: it fills `slot` on stream `key` (left empty when
    blocked, when its request was cancelled, or when the chain's payload has no message form)."""

    key: StreamKey
    slot: Slot
    channel: Channel
    method: str
    params: dict[str, Any]
    pending: Pending | None


@fast_init
@dataclass(frozen=True, slots=True)
class RelayToClient:
    """An upstream request to a client passed its chain: it fills `slot` as request `down_id` (blocked: the
    upstream is answered with the error instead)."""

    key: StreamKey
    slot: Slot
    session: SessionId
    down_id: str
    upstream_id: RequestId
    method: str
    params: dict[str, Any] | None


@fast_init
@dataclass(frozen=True, slots=True)
class AnswerUpstream:
    """The client's result to an upstream request passed its chain: the upstream gets it."""

    upstream_id: RequestId


@fast_init
@dataclass(frozen=True, slots=True)
class AnswerUpstreamError:
    """The client's error to an upstream request passed the error channel's chain: the upstream gets it."""

    upstream_id: RequestId
    error: dict[str, Any]


Continuation = (
    ForwardRequest
    | AnswerClient
    | AnswerClientError
    | AnswerFromRouter
    | DeliverNotification
    | RelayToClient
    | AnswerUpstream
    | AnswerUpstreamError
)
"""What a waiting chain run will do when it answers (one record type per transition in `Router.RESUME`)."""
