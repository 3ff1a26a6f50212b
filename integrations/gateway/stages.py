"""The built-in policy and transform stages of `proxy --policy`: the chain registries, the vault and the
gateway's own `reveal_token`. The upstream's catalog is taught to the engine by `catalog.py`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.shared.exceptions import MCPError

from interceptors import Principal, Registry

from .local import LocalTool

logger = logging.getLogger("interceptors.gateway")


@dataclass
class Stages:
    """The policy engine and the registries built from it (empty with `--policy none`)."""

    engine: Any = None
    registries: list[Registry] = field(default_factory=list)
    vault: Any = None
    local_tools: list[LocalTool] = field(default_factory=list)

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
    policy: str | None, audit_log: str | None, vault_redis: str | None = None, *, multi_principal: bool = False
) -> Stages:
    """`policy`: a profile name or file; "none" for no built-in stages. `vault_redis`: a Redis URL to share
    the vault's tokens between gateway processes (the default store is in memory). `multi_principal`: more than
    one principal can call (HTTP with tokens), so the vault's scope defaults to `principal`."""
    if policy is not None and policy.lower() == "none":
        return Stages()
    from interceptors.policy import PolicyEngine, policy_registry, transforms_selector
    from interceptors.transforms import transforms_registry

    engine = PolicyEngine(
        policy or "standard", audit_sinks=[audit_log] if audit_log else (), rate_limit_redis=vault_redis or None
    )  # rate limits shared through the same Redis as the vault (--redis)
    document = engine.policy.document
    vault = None
    if _uses_vault(document) or vault_redis:
        from interceptors.vault import RedisStore, TokenVault

        store = RedisStore(vault_redis) if vault_redis else None
        vault = TokenVault.from_config(vault_section(document, multi_principal), store=store)
    registries = [policy_registry(engine)]
    if vault is not None:
        from interceptors.vault import vault_registry

        # Reverses tokens in arguments first (priority -1000), then guards echoes of what it restored.
        registries.append(vault_registry(vault))
    registries.append(transforms_registry(document, select=transforms_selector(engine), pseudonymizer=vault))
    local_tools = [] if vault is None else [reveal_tool(vault)]
    return Stages(engine, registries, vault, local_tools)


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
