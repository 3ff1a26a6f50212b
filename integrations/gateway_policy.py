"""The built-in policy and transform stages in the gateway: chain registries, principals, priming, 401s."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import ServerRequestContext

from interceptors import InvocationContext, Principal, Registry

logger = logging.getLogger("interceptors.gateway")

PrincipalProvider = Callable[[ServerRequestContext[Any, Any]], Principal | None]
_LISTS = (
    ("tools/list", "tools"),
    ("prompts/list", "prompts"),
    ("resources/list", "resources"),
    ("resources/templates/list", "resources"),
)


@dataclass
class Stages:
    """The policy engine and the registries built from it (empty with `--policy none`)."""

    engine: Any = None
    registries: list[Registry] = field(default_factory=list)
    vault: Any = None

    def close(self) -> None:
        """Save the vault's unsaved mappings (when it has a path); safe to call more than once."""
        if self.vault is not None:
            self.vault.close()

    async def prime(
        self, request: Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]], capabilities: Any
    ) -> None:
        """Teach the engine the upstream's primitives before the first call: a hidden tool must already look
        missing, and a tool nobody listed yet must not be judged on default metadata."""
        if self.engine is None:
            return
        for method, capability in _LISTS:
            if getattr(capabilities, capability, None) is None:
                continue
            cursor: str | None = None
            for _ in range(100):  # a bounded walk over the pages
                params: dict[str, Any] = {} if cursor is None else {"cursor": cursor}
                try:
                    result = await request(method, params)
                except Exception as exc:
                    logger.warning("could not list %s upstream: %s", method, type(exc).__name__)
                    break
                self.engine.learn(method, result)
                cursor = result.get("nextCursor")
                if not cursor:
                    break


def _uses_vault(document: Any) -> bool:
    """A `vault` section, or any pseudonymize strategy anywhere in the transforms, needs a vault."""
    return bool(document.get("vault")) or "pseudonymize" in repr(document)


def build_stages(policy: str | None, audit_log: str | None, vault_redis: str | None = None) -> Stages:
    """`policy`: a profile name or file; "none" for no built-in stages. `vault_redis`: a Redis URL to share
    the vault's tokens between gateway processes (the default store is in memory)."""
    if policy is not None and policy.lower() == "none":
        return Stages()
    from interceptors.policy import PolicyEngine, policy_registry, transforms_selector
    from interceptors.transforms import transforms_registry

    engine = PolicyEngine(policy or "standard", audit_sinks=[audit_log] if audit_log else ())
    document = engine.policy.document
    vault = None
    if _uses_vault(document) or vault_redis:
        from interceptors.vault import RedisStore, TokenVault

        store = RedisStore(vault_redis) if vault_redis else None
        vault = TokenVault.from_config(document.get("vault"), store=store)
    registries = [policy_registry(engine)]
    if vault is not None:
        from interceptors.vault import vault_registry

        # Reverses tokens in arguments first (priority -1000), then guards echoes of what it restored.
        registries.append(vault_registry(vault))
    registries.append(transforms_registry(document, select=transforms_selector(engine), pseudonymizer=vault))
    return Stages(engine, registries, vault)


def stdio_principal(roles: Sequence[str]) -> PrincipalProvider:
    """On stdio the only party is whoever started the gateway: the local OS user, with the given roles."""
    from interceptors.policy import principal_for_stdio

    principal = principal_for_stdio(list(roles))

    def provide(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        return principal

    return provide


def bearer_principal(tokens: Any) -> PrincipalProvider:
    """Over HTTP: the principal of the request's bearer token (requests without one never get this far)."""

    def provide(ctx: ServerRequestContext[Any, Any]) -> Principal | None:
        request = ctx.request
        headers = getattr(request, "headers", None)
        principal: Principal | None = tokens.authenticate(headers.get("authorization") if headers else None)
        return principal

    return provide


def context_from(provider: PrincipalProvider | None) -> Callable[[ServerRequestContext[Any, Any]], InvocationContext]:
    def provide(ctx: ServerRequestContext[Any, Any]) -> InvocationContext:
        return InvocationContext(principal=None if provider is None else provider(ctx), trace_id=uuid.uuid4().hex)

    return provide


def require_bearer(app: Any, tokens: Any) -> Any:
    """ASGI wrapper: a request without a valid bearer token is answered 401 before any MCP processing."""
    body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Unauthorized"}}'

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", []) if k == b"authorization"), None)
        if tokens.authenticate(header.decode("latin-1") if header else None) is None:
            await send({
                "type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
            })  # fmt: skip
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return guarded
