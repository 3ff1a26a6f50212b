"""The policy's answer to the transforms stage: which rules match a call, and the primitive's facts.

`interceptors.transforms.transforms_registry(..., select=transforms_selector(engine))` makes the
transform pipelines follow the same roles, rules and metadata as access decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..wire import Principal
from .engine import PolicyEngine


def transforms_selector(engine: PolicyEngine) -> Callable[[Any], Any]:
    """A `select` callable: `CallFacts(event, name, argument, principal, roles)` → `Selection`.

    The rules are handed over as their document mappings (roles first, then `rules`, in order). An
    unknown primitive gets the rules that need none (those matching only on roles or principals).
    """
    from ..transforms import Selection  # imported late: the transforms package is optional here

    def select(facts: Any) -> Any:
        who = None if facts.principal is None else Principal("user", facts.principal, {"roles": list(facts.roles)})
        spec = engine.spec_for(facts.event, facts.name)
        rules = engine.matching_rules(who, spec)
        return Selection(
            rules=tuple(rule.body for rule in rules),
            sensitivity=None if spec is None else spec.sensitivity,
            category=None if spec is None else spec.category,
        )

    return select
