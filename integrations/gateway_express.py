"""The gateway's express route: operations no interceptor hooks go upstream and back as JSON, off both SDK sessions.

Why: with nothing to run, forwarding a call through the mirror costs a server dispatch downstream and a
client session upstream, each building models per message; that doubled the latency of a call. The route
takes a request on stdio (see `interceptors_server.express` for the lane's own conditions, per era) only
when the SDK path would do nothing but forward it:

- a context operation the mirror forwards as it is (tools/call, prompts/get, completion/complete), with
  no cache hint and no local tool of that name;
- no interceptor on its request or response phase (so the error, progress and log channels pass
  untouched too), and no progress token or log opt-in in `_meta` (those ride the SDK path, which relays
  them in order before the result); for a 2025-era client, an upstream without the logging capability
  (its logs would otherwise race the result);
- no middleware on the mirror besides the gateway's own; the upstream reached through our stdio pipe.

The answer is shaped as the SDK shapes it: the upstream's result checked against the spec at the
upstream's version, then sieved for the client's; an upstream error passes as it is; an upstream that went
away is the same -32603 as on the SDK path.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, LOG_LEVEL_META_KEY
from mcp_types import methods as spec_methods
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from interceptors import INTERNAL_ERROR, Direction, Phase

from .gateway_upstream import UPSTREAM_CLOSED_MESSAGE

if TYPE_CHECKING:
    from .gateway_legacy import Gateway

logger = logging.getLogger("interceptors.gateway")

EXPRESS_METHODS = frozenset({"tools/call", "prompts/get", "completion/complete"})
INVALID_RESULT_MESSAGE = "the upstream server returned an invalid result"


class GatewayRoute:
    """An `ExpressRoute` for one gateway (see `interceptors_server.express.ExpressLane`)."""

    def __init__(self, gateway: Gateway, methods: frozenset[str]) -> None:
        self._gateway = gateway
        self._methods = methods

    def accepts(self, method: str, params: dict[str, Any], version: str) -> bool:
        gateway = self._gateway
        if method not in self._methods or not gateway.upstream.raw_requests or gateway.upstream.closed.is_set():
            return False
        if version not in MODERN_PROTOCOL_VERSIONS and gateway.upstream.capabilities.logging is not None:
            return False  # a 2025 client gets an operation's logs before its result: the SDK path orders them
        meta = params.get("_meta")
        if isinstance(meta, dict) and ("progressToken" in meta or LOG_LEVEL_META_KEY in meta):
            return False
        if method == "tools/call" and (not isinstance(name := params.get("name"), str) or name in gateway.local_tools):
            return False
        chain = gateway.chain
        return (
            chain.plan(method, Phase.REQUEST, Direction.RECEIVING).empty
            and chain.plan(method, Phase.RESPONSE, Direction.SENDING).empty
        )

    async def answer(self, method: str, params: dict[str, Any], version: str) -> dict[str, Any]:
        upstream = self._gateway.upstream
        try:
            result = await upstream.raw_request(method, params)
        except MCPError as exc:
            if exc.error.code == CONNECTION_CLOSED and upstream.closed.is_set():
                raise MCPError(INTERNAL_ERROR, UPSTREAM_CLOSED_MESSAGE) from None
            raise
        try:
            spec_methods.serialize_server_result(method, upstream.handshake.protocol_version, result)
            if version in MODERN_PROTOCOL_VERSIONS:
                result = {"resultType": "complete", **result}  # required at 2026-07-28 (a 2025 upstream omits it)
            return spec_methods.serialize_server_result(method, version, result)
        except ValidationError:
            logger.warning("the upstream returned an invalid %s result", method)
            raise MCPError(INTERNAL_ERROR, INVALID_RESULT_MESSAGE) from None
