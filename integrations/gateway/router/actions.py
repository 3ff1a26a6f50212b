"""What the router asks its shell to do. The shell performs them in order and never decides anything itself.

Bytes are one serialised JSON-RPC message without framing (stdio adds the newline, HTTP makes it a body or
an SSE event). `related` names the downstream request a message belongs to, so an HTTP shell writes it on
that request's stream; None means the session's own stream (stdio: the only one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from interceptors import Direction, Phase
from interceptors._fastinit import fast_init
from interceptors.protocol.messages import RequestId

SessionId = str


@fast_init
@dataclass(frozen=True, slots=True)
class SendUpstream:
    """`request_id`: the upstream id when the message is a request (an HTTP shell reads its reply stream,
    the shell's clock times it); None for notifications and replies."""

    data: bytes
    request_id: int | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class SendDownstream:
    """`final`: this is the reply that ends request `related` (an HTTP shell then ends that response).
    `outgoing`: the id of the request to the client this message is (sampling, elicitation, roots): a shell
    that cannot deliver it tells the router (`Router.undeliverable`), so the upstream gets an answer."""

    session: SessionId
    data: bytes
    related: RequestId | None = None
    final: bool = field(default=False, compare=False)
    outgoing: RequestId | None = field(default=None, compare=False)


@fast_init
@dataclass(frozen=True, slots=True)
class RequestState:
    """What one downstream request carries into every chain run until its final reply (never consumed).

    `call` is unique per request for the router's lifetime: stages key what they remember by it, so a
    progress or log pass cannot use up what the request pass learned. `learned` is what the request's
    chain reported back (see `ChainPassed.learned`), given to every later pass of the same request.
    """

    call: int
    method: str
    target: str | None
    learned: dict[str, Any] = field(default_factory=dict)


@fast_init
@dataclass(frozen=True, slots=True)
class RunChain:
    """Run the chain for `event` in `phase`/`direction` on `payload`, then call `chain_done(ticket, outcome)`.

    `channel` tells the stages what the payload is (see `channels.Channel`); `context` is the session's
    opaque invocation context (its principal). A shell that finds no plan for the event answers at once
    with `ChainPassed(payload, modified=False)`.
    """

    ticket: int
    event: str
    phase: Phase
    direction: Direction
    channel: str
    payload: Any
    context: Any
    request: RequestState | None = None


@dataclass(frozen=True, slots=True)
class AnswerLocally:
    """A method the shell serves itself (exposed interceptors, gateway-local tools): answer with `reply_local`."""

    session: SessionId
    request_id: RequestId
    method: str
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class CatalogChanged:
    """The upstream said a list changed (`tools`, `prompts` or `resources`): re-learn it before trusting it."""

    kind: str


@dataclass(frozen=True, slots=True)
class Dropped:
    """A message the router deliberately did not deliver; for the shell's log (never holds payload text)."""

    reason: str
    method: str | None = None


@dataclass(frozen=True, slots=True)
class Close:
    """Stop: the upstream went away (every pending request has been answered already)."""

    reason: str


Action = SendUpstream | SendDownstream | RunChain | AnswerLocally | CatalogChanged | Dropped | Close


@fast_init
@dataclass(frozen=True, slots=True)
class ChainPassed:
    """The chain let the payload through: `payload` is the final one (the input when nothing changed).

    `learned` is what the request pass wants later passes of the same request to see (provenance, the
    rule selection); the router keeps it with the request until its final reply.
    """

    payload: Any
    modified: bool = False
    learned: dict[str, Any] | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class ChainBlocked:
    """The chain refused. `error` is the JSON-RPC error object the requester should get (None: a generic
    -32603); `substitute` a result to answer with instead; `not_found` says the block hides the primitive,
    so the requester gets exactly what the upstream answers for a missing one."""

    error: dict[str, Any] | None = None
    substitute: dict[str, Any] | None = None
    not_found: bool = False


ChainOutcome = ChainPassed | ChainBlocked
