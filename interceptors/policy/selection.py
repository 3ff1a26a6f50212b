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

    # The answer for one (spec, matching rules) pair, made once. Keyed by identity (compiled rules hold their
    # document mappings, so they cannot be hashed by value): the engine hands back the same rules tuple while its
    # decision cache holds the entry, and each memo entry keeps its spec and tuple alive, so no id is reused.
    made: dict[tuple[int, int], tuple[Any, tuple[Any, ...], Any]] = {}

    def select(facts: Any) -> Any:
        who = None if facts.principal is None else Principal("user", facts.principal, {"roles": list(facts.roles)})
        spec = engine.spec_for(facts.event, facts.name)
        rules = engine.matching_rules(who, spec)
        key = (id(spec), id(rules))
        hit = made.get(key)
        if hit is not None and hit[0] is spec and hit[1] is rules:
            return hit[2]
        selection = Selection(
            rules=tuple(rule.body for rule in rules),
            sensitivity=None if spec is None else spec.sensitivity,
            category=None if spec is None else spec.category,
        )
        if spec is not None or not rules:  # rules without a spec are a new tuple every time: not worth keeping
            if len(made) >= 4096:
                made.clear()
            made[key] = (spec, rules, selection)
        return selection

    return select
