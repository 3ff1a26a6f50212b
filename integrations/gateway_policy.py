"""The built-in policy and transform stages in the gateway: chain registries, principals, priming, 401s."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from interceptors import InvocationContext, Principal, Registry
from interceptors_chain.failures import describe

from .gateway_tools import LocalTool, with_local_tools

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
    local_tools: list[LocalTool] = field(default_factory=list)
    guard: Any = None
    """The policy's cross-boundary guard (`SessionGuard`), when it enables one."""

    def authorize(self, principal: Principal | None, params: Mapping[str, Any]) -> None:
        """The policy's decision on a call to a gateway-local tool (audited by the engine, like any call)."""
        if self.engine is None:
            return
        decision = self.engine.check_call(principal, "tools/call", params)
        if not decision.allowed:
            refusal = decision.error()
            raise MCPError(refusal.code, refusal.message, refusal.data)

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
                    logger.warning("could not list %s upstream: %s", method, describe(exc))
                    break
                cursor = result.get("nextCursor")
                if method == "tools/list" and not params:  # our own tools are listed on the first page
                    result = with_local_tools(result, {t.name: t for t in self.local_tools}, True)
                self.engine.learn(method, result)
                if not cursor:
                    break


def _uses_vault(document: Any) -> bool:
    """A `vault` section, or any pseudonymize strategy anywhere in the transforms, needs a vault."""
    return bool(document.get("vault")) or "pseudonymize" in repr(document)


def vault_section(document: Any, multi_principal: bool) -> dict[str, Any]:
    """The policy's `vault` section, with `scope: principal` unless it says otherwise when more than one principal
    can call (HTTP with bearer tokens): with one global namespace, any token holder could send another's
    pseudonym back and have the upstream receive that principal's real value."""
    section = dict(document.get("vault") or {})
    if multi_principal:
        if "scope" not in section:
            section["scope"] = "principal"
        elif section["scope"] == "global":
            logger.warning(
                "vault scope 'global' with several principals: any of them can have another's pseudonyms reversed"
            )
    return section


def build_stages(
    policy: str | None,
    audit_log: str | None,
    vault_redis: str | None = None,
    *,
    multi_principal: bool = False,
    previous: Stages | None = None,
) -> Stages:
    """`policy`: a profile name or file; "none" for no built-in stages. `vault_redis`: a Redis URL to share
    the vault's tokens, the rate limits, the guard's taints and the audit stream between gateway processes (the
    default stores are in memory). `multi_principal`: more than one principal can call (HTTP with tokens), so
    the vault's scope defaults to `principal`. `previous`: the stages a reload replaces; their vault, audit
    sinks and guard state are kept (a pseudonym minted before the reload still reverses)."""
    if policy is not None and policy.lower() == "none":
        return Stages(vault=previous.vault if previous is not None else None)
    from interceptors.policy import PolicyEngine, load_policy, policy_registry, transforms_selector
    from interceptors.transforms import transforms_registry

    loaded = load_policy(policy or "standard")  # validated first: an invalid document raises here
    document = loaded.document
    fail_open = bool((document.get("shared_state") or {}).get("fail_open", False))
    sinks: list[Any]
    if previous is not None and previous.engine is not None:
        sinks = list(previous.engine.audit.sinks)
    else:
        sinks = [audit_log] if audit_log else []
        if vault_redis:  # the audit stream in Redis, next to the file (the same records)
            from interceptors.policy.audit_stream import RedisAuditStream

            sinks.append(RedisAuditStream(vault_redis))
    engine = PolicyEngine(
        loaded, audit_sinks=sinks, rate_limit_redis=vault_redis or None, rate_limit_fail_open=fail_open
    )  # rate limits shared through the same Redis as the vault (--redis)
    vault = previous.vault if previous is not None else None
    if vault is None and (_uses_vault(document) or vault_redis):
        from interceptors.vault import RedisStore, TokenVault

        store = RedisStore(vault_redis) if vault_redis else None
        vault = TokenVault.from_config(vault_section(document, multi_principal), store=store)
    registries = [policy_registry(engine)]
    guard = _guard(document, loaded, vault_redis, fail_open, previous)
    if guard is not None:
        from interceptors.security.session_guard import guard_registry

        registries.append(guard_registry(guard))
    if vault is not None:
        from interceptors.vault import vault_registry

        # Reverses tokens in arguments first (priority -1000), then guards echoes of what it restored.
        registries.append(vault_registry(vault))
    registries.append(transforms_registry(document, select=transforms_selector(engine), pseudonymizer=vault))
    local_tools = [] if vault is None else [reveal_tool(vault)]
    return Stages(engine, registries, vault, local_tools, guard)


def _guard(document: Any, loaded: Any, redis_url: str | None, fail_open: bool, previous: Stages | None) -> Any:
    """The policy's `cross_boundary_guard` (None when off); its taints are kept across a reload, and shared
    through Redis with `--redis` (keyed hashes: the policy's vault key must be set in every process)."""
    section = document.get("cross_boundary_guard")
    if isinstance(section, bool):
        section = {"enabled": section}
    if not section or not section.get("enabled", True):
        return None
    from interceptors.security.server_of import DEFAULT_ROSTER
    from interceptors.security.session_guard import SessionGuard

    roster = {**DEFAULT_ROSTER, **(section.get("roster") or {})}
    old = previous.guard if previous is not None else None
    store = old.guard._store if old is not None else None
    if store is None and redis_url:
        from interceptors.security import RedisTaintStore

        key = loaded.secret_key()
        if key is None:
            raise ValueError(
                "cross_boundary_guard with --redis needs the policy's vault key (vault.key_env, default "
                "MCP_INTERCEPTORS_VAULT_KEY) in every gateway process: secrets are stored as keyed hashes"
            )
        store = RedisTaintStore(redis_url, key=key)
    return SessionGuard(roster, store=store, fail_open=fail_open)


def reveal_tool(vault: Any) -> LocalTool:
    """`reveal_token`, offered by the gateway when a vault exists. It declares the `reveal` capability, so
    the policy shows it and allows it only to principals granted `reveal`, and audits every call."""
    from interceptors.vault import RevealTool

    def audit(record: Any) -> None:
        logger.warning("reveal_token used by %r (found=%s)", record.principal, record.found)  # never the value

    tool = RevealTool(vault, audit)

    def run(arguments: Mapping[str, Any], principal: Principal | None) -> Mapping[str, Any]:
        answer: Mapping[str, Any] = tool(arguments, None if principal is None else principal.id)
        return answer

    return LocalTool(
        tool.name,
        tool.description,
        tool.input_schema,
        run,
        meta={"io.mcp-interceptors/capabilities": ["reveal"], "io.mcp-interceptors/sensitivity": "restricted"},
    )


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
        principal = None if provider is None else provider(ctx)
        return InvocationContext(principal=principal, trace_id=os.urandom(16).hex())  # 32 hex digits, as uuid4

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
