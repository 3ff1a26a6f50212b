"""`guard_secrets`: a request whose arguments carry credentials is refused (or scrubbed) before it runs.

Argument names are scanned as well as values (`{"<a token>": 1}` is refused too). A model should pass
references to secrets, never the secrets: a credential in an argument has probably
been lifted from an earlier result or from the user, and the tool is the wrong place for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .base import Options, Transform, TransformContext, count
from .entities import CATEGORIES
from .keyrules import BUILTIN_KEY_RULES
from .redactor import Redactor


class SecretsRefused(ValueError):
    """Arguments carried secrets. The message names entity types only, never a value (map it to -32602)."""

    def __init__(self, entities: Iterable[str]) -> None:
        self.entities = sorted(set(entities))
        super().__init__(
            f"Arguments appear to contain secrets ({', '.join(self.entities)}); refusing to process them. "
            "Pass resource references, never credentials."
        )

    @property
    def data(self) -> dict[str, Any]:
        return {"entities": list(self.entities)}


def guarded_key_rules(categories: Iterable[str]) -> list[str]:
    """The built-in key rules the guard applies: `sensitive_key`, and every rule whose category it guards."""
    wanted = set(categories)
    return [rule.name for rule in BUILTIN_KEY_RULES if rule.name == "sensitive_key" or rule.category in wanted]


class SecretGuard(Transform):
    type = "guard_secrets"
    direction = "input"
    OPTIONS = ("action", "categories", "custom_detectors", "disabled_detectors", "min_confidence")

    def __init__(
        self, options: Mapping[str, Any], path: str = "guard_secrets", transform_id: str | None = None
    ) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        self.action = opts.choice("action", "reject", ("reject", "redact"))
        categories = opts.strings("categories", ("secret",))
        if not categories or any(c not in CATEGORIES for c in categories):
            raise ValueError(f"{path}.categories: must be a non-empty list of {', '.join(CATEGORIES)}")
        self.categories = categories
        self._redactor = Redactor(
            {
                "strategies": {category: "redact" for category in categories},
                # Every key rule of a guarded category: JSON arguments are parsed (a string holding a JSON Web
                # Key becomes a mapping), and the private members of a JWK are found by their key and its `kty`
                # sibling, as the output redactor finds them; the value alone matches no pattern.
                "key_rules": guarded_key_rules(categories),
                # The 0.5 high-entropy heuristic would refuse every opaque id a model passes along.
                "min_confidence": opts.number("min_confidence", 0.8, 0.0, 1.0),
                "scan_keys": True,  # a credential used as an argument name is still a credential
                "tags": False,
                "name_mentions": False,
                "decode": False,  # arguments are refused or scrubbed as spelled
                "custom_detectors": opts.items("custom_detectors"),
                "disabled_detectors": list(opts.strings("disabled_detectors", ())),
            },
            f"{path}(redactor)",
        )

    def findings(self, value: Any, ctx: TransformContext | None = None) -> tuple[Any, dict[str, int]]:
        """The scrubbed value and `{entity: count}` of what was found (an empty dict: the same object back)."""
        probe = TransformContext(direction="input")
        if ctx is not None:
            probe.kind, probe.principal, probe.pseudonymizer = ctx.kind, ctx.principal, ctx.pseudonymizer
        new = self._redactor.apply(value, probe)
        found: dict[str, int] = dict(probe.report.get("redacted", {}))
        return (value, {}) if not found else (new, found)

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        new, found = self.findings(value, ctx)
        if not found:
            return value
        if self.action == "reject":
            raise SecretsRefused(found)
        for entity, amount in found.items():
            count(ctx.report, "redacted_arguments", entity, amount)
        return new
