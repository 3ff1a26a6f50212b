"""`guard_secrets`: a request whose arguments carry credentials is refused (or scrubbed) before it runs.

Argument names are scanned as well as values (`{"<a token>": 1}` is refused too). A model should pass
references to secrets, never the secrets: a credential in an argument has probably
been lifted from an earlier result or from the user, and the tool is the wrong place for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from .base import Options, Transform, TransformContext, count
from .entities import CATEGORIES, fold_for_hints
from .keyrules import BUILTIN_KEY_RULES, BUILTIN_KEY_RULES_BY_NAME
from .normalize import needs_normalizing, normalize_for_matching
from .redactor import Redactor
from .triepattern import literal_alternation


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


def _longest_part(key: str) -> str:
    """A word every key that normalises to `key` spells (lower-cased) in its text: its longest `_` part."""
    return max(key.split("_"), key=len)


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
        rules = guarded_key_rules(categories)
        options = {
            "strategies": {category: "redact" for category in categories},
            # The 0.5 high-entropy heuristic would refuse every opaque id a model passes along.
            "min_confidence": opts.number("min_confidence", 0.8, 0.0, 1.0),
            "scan_keys": True,  # a credential used as an argument name is still a credential
            "tags": False,
            "name_mentions": False,
            "decode": False,  # arguments are refused or scrubbed as spelled
            "custom_detectors": opts.items("custom_detectors"),
            "disabled_detectors": list(opts.strings("disabled_detectors", ())),
        }
        # Every key rule of a guarded category: JSON arguments are parsed (a string holding a JSON Web Key
        # becomes a mapping), and the private members of a JWK are found by their key beside `kty`, as the
        # output redactor finds them; the value alone matches no pattern.
        self._redactor = Redactor({**options, "key_rules": rules}, f"{path}(redactor)")
        # A rule that needs a sibling key cannot act where no key could be that sibling; without such rules
        # the redactor skips arguments whose text holds no sensitive key word, so they run only when needed.
        gated = [name for name in rules if BUILTIN_KEY_RULES_BY_NAME[name].requires_sibling]
        words = sorted({_longest_part(s) for name in gated for s in BUILTIN_KEY_RULES_BY_NAME[name].requires_sibling})
        self._sibling_hint = re.compile(literal_alternation(words)) if words else None
        self._plain = (
            Redactor({**options, "key_rules": [n for n in rules if n not in gated]}, f"{path}(redactor)")
            if gated
            else self._redactor
        )

    def _redactor_for(self, value: Any) -> Redactor:
        """The full redactor when the value's text could hold a sibling a gated key rule needs, else the plain one."""
        if self._sibling_hint is None:
            return self._redactor
        try:
            raw = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
        except TypeError:
            return self._redactor
        if needs_normalizing(raw):  # a key spelled with escapes or invisible characters still counts
            raw = normalize_for_matching(raw.replace("\\\\", "\\"))[0]
        return self._redactor if self._sibling_hint.search(fold_for_hints(raw)) else self._plain

    def findings(self, value: Any, ctx: TransformContext | None = None) -> tuple[Any, dict[str, int]]:
        """The scrubbed value and `{entity: count}` of what was found (an empty dict: the same object back)."""
        probe = TransformContext(direction="input")
        if ctx is not None:
            probe.kind, probe.principal, probe.pseudonymizer = ctx.kind, ctx.principal, ctx.pseudonymizer
        new = self._redactor_for(value).apply(value, probe)
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
