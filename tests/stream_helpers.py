"""Drive the router with the real transform stage over a stream of progress or log messages (shared by the
stream tests)."""

from __future__ import annotations

import json
from typing import Any

from integrations.gateway.router import ChainOutcome, ChainPassed, RouterConfig, RunChain, SendDownstream
from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.channels import transform_payload
from interceptors.transforms.stream import StreamHoldBack
from tests.router_helpers import handshake_session, line, ready_router, settle, upstream_bodies

STANDARD = assemble_output(STANDARD_TRANSFORMS)
OPEN = assemble_output({"transforms": []})
GHP = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"


def _stage(pipeline: Any) -> Any:
    """The output stage as the gateway's chain runs it on a side message (its request's event)."""

    def chain(run: RunChain) -> ChainOutcome:
        out, changed = transform_payload(run.event, run.payload, pipeline, TransformContext())
        return ChainPassed(out, modified=changed)

    return chain


def _stream(pipeline: Any, method: str, messages: list[str], *, hold: bool = True) -> list[bytes]:
    """Send `messages` as progress (or log) notifications of one tools/call, then its reply: the raw lines the
    client receives for the notifications, in order."""
    router = ready_router(RouterConfig(hold_back=StreamHoldBack if hold else None))
    handshake_session(router, "a")
    chain = _stage(pipeline)
    request = line(id=1, method="tools/call", params={"name": "x", "_meta": {"progressToken": "p"}})
    (sent,) = upstream_bodies(settle(router, router.receive_downstream("a", request), chain))
    out: list[Any] = []
    for text in messages:
        if method == "notifications/progress":
            params: dict[str, Any] = {"progressToken": sent["id"], "progress": 1, "message": text}
        else:
            params = {"level": "error", "logger": "svc", "data": text}
        out += settle(router, router.receive_upstream(line(method=method, params=params)), chain)
    out += settle(router, router.receive_upstream(line(id=sent["id"], result={"content": []})), chain)
    return [a.data for a in out if isinstance(a, SendDownstream) and b'"method"' in a.data]


def _texts(raw: list[bytes], key: str = "message") -> list[str]:
    return [json.loads(data)["params"][key] for data in raw]
