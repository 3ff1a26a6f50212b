"""The built-in policy and transform stages of `proxy --policy`: the chain registries, the vault and the
gateway's own `reveal_token`. The upstream's catalog is taught to the engine by `catalog.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from interceptors import Principal, Registry

if TYPE_CHECKING:  # the SDK loads once the stages are built: a policy or vault refused at start does not wait for it
    from .local import LocalTool

logger = logging.getLogger("interceptors.gateway")
POLICY_INTERCEPTOR = "policy"
"""The name `policy_registry` gives the policy validator: its refusals are audited by the engine itself."""


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
            from mcp.shared.exceptions import MCPError

            refusal = decision.error()
            raise MCPError(refusal.code, refusal.message, refusal.data)

    def refused(self, principal: Principal | None, method: str, payload: Any, result: Any) -> dict[str, Any] | None:
        """A client request the chain refused (`ChainAdapter.on_refusal`): unless the policy validator refused it
        itself (and audited it), the engine audits it as `denied` with the interceptor and its reason and gives the
        error to answer with: the reason included, secrets masked. None: keep the chain's answer."""
        if self.engine is None or not result.aborted_at:
            return None
        first = result.aborted_at[0]
        if first.interceptor == POLICY_INTERCEPTOR:
            return None
        if first.kind.value == "rejected":
            reason = "; ".join(first.messages) or first.reason
        else:  # a failure or a timeout: its exception text is not for the client
            reason = "interceptor timed out" if first.kind.value == "timeout" else "interceptor failed"
        params = payload.get("params") if isinstance(payload, Mapping) else None
        error: dict[str, Any] = self.engine.record_refusal(
            principal, method, params, first.interceptor, reason, first.requester_error
        )
        if first.kind.value != "rejected":
            return None  # audited; the client keeps the chain's -32603
        return error

    def close(self) -> None:
        """Save the vault's unsaved mappings (when it has a path); safe to call more than once."""
        if self.vault is not None:
            self.vault.close()


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
    elif vault is not None:  # a reload keeps the vault; where real values go follows the new document
        vault.reconfigure(vault_section(document, multi_principal))
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

    from .local import LocalTool

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
