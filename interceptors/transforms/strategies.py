"""What happens to a sensitive value: redact, mask, hash, pseudonymize, generalize, drop or keep.

`Pseudonymizer` is the seam the token vault plugs into later; until then `KeyedHasher` stands in, so
`pseudonymize` gives a keyed, stable, irreversible `<entity>:<hex>` just like `hash`.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import re
import secrets
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .entities import IP_ENTITIES, ip_class

KEY_ENV = "MCP_INTERCEPTORS_TRANSFORMS_KEY"


class _Drop:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DROP"


DROP: Any = _Drop()
"""Returned instead of a value when the containing field or list element must go."""

KINDS = ("redact", "mask", "hash", "pseudonymize", "generalize", "drop", "keep")
SECTIONS = {
    "redact": "redacted",
    "mask": "masked",
    "hash": "hashed",
    "pseudonymize": "pseudonymized",
    "generalize": "generalized",
    "drop": "dropped",
}
ALIASES = {
    "pseudonymise": "pseudonymize",
    "tokenize": "pseudonymize",
    "tokenise": "pseudonymize",
    "generalise": "generalize",
    "bucket": "generalize",
    "remove": "drop",
    "replace": "redact",
    "none": "keep",
    "allow": "keep",
}


@runtime_checkable
class Pseudonymizer(Protocol):
    """What the redactor needs from a token vault. The vault (a later issue) implements all of it."""

    @property
    def reversible(self) -> bool:
        """Whether `detokenize` can give real values back (the input pipeline reverses tokens only then)."""
        ...

    def namespace_for(self, principal: str | None) -> str:
        """Tokens of one namespace are never reversed in another (per principal, or one global one)."""
        ...

    def tokenize(self, value: str, entity: str, namespace: str) -> str:
        """A stable replacement for `value` as `entity` in `namespace`."""
        ...

    def digest(self, value: str, entity: str) -> str:
        """Hex HMAC-SHA256 of `entity \\x1f value` under the hashing sub-key (the `hash` strategy)."""
        ...

    def detokenize(self, text: str, namespace: str) -> tuple[str, list[tuple[str, str]]]:
        """`text` with every token of `namespace` replaced by its real value, and the `(real, token)` pairs."""
        ...


def _raw_key(key: bytes | str | None) -> bytes:
    if key is None:
        env = os.environ.get(KEY_ENV)
        return env.encode() if env else secrets.token_bytes(32)
    return key.encode() if isinstance(key, str) else bytes(key)


class KeyedHasher:
    """The stand-in pseudonymizer: keyed hashes, stable per key, never reversible.

    The key comes from the argument, else `$MCP_INTERCEPTORS_TRANSFORMS_KEY`, else 32 random bytes (stable for
    the life of the process only). Only a derived sub-key is kept, and it is never exposed.
    """

    reversible = False

    def __init__(self, key: bytes | str | None = None) -> None:
        self._key = hmac.new(_raw_key(key), b"mcp-interceptors/hash", hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "KeyedHasher(<key hidden>)"

    def namespace_for(self, principal: str | None) -> str:
        return "global"

    def digest(self, value: str, entity: str) -> str:
        message = f"{entity}\x1f{value}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def tokenize(self, value: str, entity: str, namespace: str) -> str:
        return f"{entity}:{self.digest(value, entity)[:12]}"

    def detokenize(self, text: str, namespace: str) -> tuple[str, list[tuple[str, str]]]:
        return text, []


@dataclass(slots=True)
class Env:
    """What strategies need at apply time."""

    pseudonymizer: Pseudonymizer
    namespace: str = "global"
    redact_template: str = "[REDACTED:{entity}]"
    hash_template: str = "{entity}:{digest}"


# --- parsing ------------------------------------------------------------------------------------------


def _int(options: Mapping[str, Any], name: str, path: str, low: int, high: int | None = None) -> int | None:
    if name not in options:
        return None
    value = options[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{path}.{name}: must be an integer {bound}")
    return value


def _str(options: Mapping[str, Any], name: str, path: str) -> str | None:
    if name not in options:
        return None
    if not isinstance(options[name], str):
        raise ValueError(f"{path}.{name}: must be a string")
    return str(options[name])


def check_template(template: str, allowed: Iterable[str], path: str) -> str:
    """A `str.format` template that uses only the named fields (a bad one fails at load, not per value)."""
    names = set(allowed)
    try:
        for _, field_name, _, _ in string.Formatter().parse(template):
            if field_name is not None and field_name not in names:
                raise ValueError(f"{path}: only the fields {', '.join(sorted(names))} may be used")
    except ValueError as exc:
        if str(exc).startswith(path):
            raise
        raise ValueError(f"{path}: not a valid format template") from None
    return template


_OPTIONS: dict[str, frozenset[str]] = {
    "redact": frozenset({"text", "template"}),
    "mask": frozenset({"keep_first", "keep_last", "char", "preserve", "max_length"}),
    "hash": frozenset({"length", "template"}),
    "pseudonymize": frozenset({"as"}),
    "generalize": frozenset({"ipv4_prefix", "ipv6_prefix", "granularity", "keep_labels", "bucket"}),
    "drop": frozenset(),
    "keep": frozenset(),
}
_GRANULARITY = {"year": 4, "month": 7, "day": 10, "hour": 13, "minute": 16}


@dataclass(frozen=True, slots=True)
class Strategy:
    """A parsed strategy. `custom` strategies exist only in code (the conformance redactor's handles)."""

    kind: str
    options: tuple[tuple[str, Any], ...] = ()
    custom: Callable[[str, str, str], str] | None = field(default=None, compare=False)
    """`(value, entity, detector or rule name) -> replacement` for code-built strategies."""
    section: str | None = None

    @property
    def keep(self) -> bool:
        return self.kind == "keep"

    def opt(self, name: str, default: Any = None) -> Any:
        for key, value in self.options:
            if key == name:
                return value
        return default

    def report_section(self) -> str:
        return self.section or SECTIONS.get(self.kind, "redacted")

    def apply(self, value: str, entity: str, env: Env, source: str = "") -> Any:
        """The replacement text, `value` itself for keep, or DROP."""
        kind = self.kind
        if self.custom is not None:
            return self.custom(value, entity, source)
        if kind == "keep":
            return value
        if kind == "redact":
            text = self.opt("text")
            if text is not None:
                return text
            return str(self.opt("template", env.redact_template)).format(entity=entity, length=len(value))
        if kind == "mask":
            return _mask(value, self)
        if kind == "hash":
            length = self.opt("length", 12)
            digest = env.pseudonymizer.digest(value, entity)[:length]
            return str(self.opt("template", env.hash_template)).format(entity=entity, digest=digest)
        if kind == "pseudonymize":
            return env.pseudonymizer.tokenize(value, self.opt("as") or entity, env.namespace)
        if kind == "generalize":
            return generalize(value, entity, self)
        return DROP


KEEP = Strategy("keep")
REDACT = Strategy("redact")


def parse_strategy(spec: Any, path: str) -> Strategy:
    """A string, `{strategy|type|kind: X, ...options}`, `true` (redact) or `false`/null (keep)."""
    if spec is True:
        return REDACT
    if spec is False or spec is None:
        return KEEP
    options: dict[str, Any] = {}
    if isinstance(spec, str):
        name = spec
    elif isinstance(spec, Mapping):
        heads = [k for k in ("strategy", "type", "kind") if k in spec]
        if len(heads) != 1 or not isinstance(spec[heads[0]], str):
            raise ValueError(f"{path}: a strategy mapping needs exactly one of strategy, type or kind (a string)")
        name = spec[heads[0]]
        options = {str(k): v for k, v in spec.items() if k != heads[0]}
    else:
        raise ValueError(f"{path}: a strategy is a name, a mapping, true or false")
    kind = name.strip().lower().replace("-", "_")
    kind = ALIASES.get(kind, kind)
    if kind not in _OPTIONS:
        raise ValueError(f"{path}: unknown strategy (expected one of {', '.join(KINDS)})")
    unknown = sorted(set(options) - _OPTIONS[kind])
    if unknown:
        raise ValueError(f"{path}: unknown option(s) for {kind}: {', '.join(_safe_names(unknown))}")
    if kind == "redact":
        _str(options, "text", path)
        if (template := _str(options, "template", path)) is not None:
            check_template(template, ("entity", "length"), f"{path}.template")
    elif kind == "mask":
        _int(options, "keep_first", path, 0)
        _int(options, "keep_last", path, 0)
        _int(options, "max_length", path, 1)
        char = _str(options, "char", path)
        if char is not None and len(char) != 1:
            raise ValueError(f"{path}.char: must be a single character")
        _str(options, "preserve", path)
    elif kind == "hash":
        _int(options, "length", path, 4, 64)
        if (template := _str(options, "template", path)) is not None:
            check_template(template, ("entity", "digest"), f"{path}.template")
    elif kind == "pseudonymize":
        _str(options, "as", path)
    elif kind == "generalize":
        _int(options, "ipv4_prefix", path, 0, 32)
        _int(options, "ipv6_prefix", path, 0, 128)
        _int(options, "keep_labels", path, 1)
        _int(options, "bucket", path, 1)
        granularity = _str(options, "granularity", path)
        if granularity is not None and granularity not in _GRANULARITY:
            raise ValueError(f"{path}.granularity: must be one of {', '.join(_GRANULARITY)}")
    return Strategy(kind, tuple(sorted(options.items())))


def _safe_names(names: Iterable[str]) -> list[str]:
    """Option names are echoed only when they look like option names (a key could be anything)."""
    return [repr(n) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,40}", n) else "<unprintable>" for n in names]


# --- mask -----------------------------------------------------------------------------------------------


def _mask(value: str, strategy: Strategy) -> str:
    size = len(value)
    char = strategy.opt("char", "*")
    preserve = strategy.opt("preserve", "")
    if size <= 4:
        return "".join(c if c in preserve else char for c in value)
    first, last = strategy.opt("keep_first", 0), strategy.opt("keep_last", 4)
    if first + last > size // 2:  # keeping that much would give most of the value away
        first, last = 0, min(last, size // 4)
    middle = "".join(c if c in preserve else char for c in value[first : size - last])
    max_length = strategy.opt("max_length")
    if max_length is not None and first + len(middle) + last > max_length:
        middle = middle[: max(0, max_length - first - last)]
    return value[:first] + middle + (value[size - last :] if last else "")


# --- generalize -------------------------------------------------------------------------------------------

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2})?")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _generalize_ip(value: str, strategy: Strategy) -> str | None:
    try:
        network = ipaddress.ip_network(value, strict=False)
    except ValueError:
        return None
    if network.prefixlen == 0 or ip_class(network.network_address) == "special":
        return value
    prefix = strategy.opt("ipv4_prefix", 24) if network.version == 4 else strategy.opt("ipv6_prefix", 48)
    if network.prefixlen <= prefix:
        return value
    return str(network.supernet(new_prefix=prefix))


def _generalize_arn(value: str) -> str:
    parts = value.split(":", 5)
    if len(parts) < 6:
        return "arn:*"
    resource = parts[5]
    kind = re.split(r"[/:]", resource, maxsplit=1)[0] if ("/" in resource or ":" in resource) else ""
    tail = f"{kind}/*" if kind else "*"
    return f"arn:{parts[1]}:{parts[2]}:{parts[3]}:*:{tail}"


def _generalize_azure(value: str) -> str:
    segments = value.strip("/").split("/")
    out = []
    for index, segment in enumerate(segments):
        # Odd positions are names and ids; even ones are collection names, `providers` and namespaces.
        is_value = index % 2 == 1 and segments[index - 1].lower() != "providers"
        out.append("*" if is_value else segment)
    return "/" + "/".join(out)


_GCP_KEEP_AFTER = frozenset({"zones", "regions", "locations"})


def _generalize_gcp(value: str) -> str:
    prefix = ""
    body = value
    if value.startswith("//"):
        host, _, body = value[2:].partition("/")
        prefix = f"//{host}/"
    segments = body.split("/")
    out = []
    for index, segment in enumerate(segments):
        if index % 2 == 1 and segments[index - 1] not in _GCP_KEEP_AFTER and segment != "-":
            out.append("*")
        else:
            out.append(segment)
    return prefix + "/".join(out)


def _bucket(value: str, size: int) -> str | None:
    if not _NUMBER.fullmatch(value):
        return None
    number = float(value)
    low = int(number // size) * size
    return f"{low}-{low + size - 1}"


def generalize(value: str, entity: str, strategy: Strategy) -> str:
    """A coarser truth: the supernet, the day, the domain, the resource type, the number's bucket."""
    if entity in IP_ENTITIES:
        result = _generalize_ip(value, strategy)
        if result is not None:
            return result
    if entity == "timestamp" and _TIMESTAMP.match(value):
        return value[: _GRANULARITY[strategy.opt("granularity", "day")]]
    if entity == "email" and "@" in value:
        return "*@" + value.rsplit("@", 1)[1]
    if entity == "hostname" and "." in value:
        labels = value.split(".")
        keep = strategy.opt("keep_labels", 2)
        return value if len(labels) <= keep else "*." + ".".join(labels[-keep:])
    if entity == "aws_arn" and value.startswith("arn:"):
        return _generalize_arn(value)
    if entity == "azure_resource_id" and value.lower().startswith("/subscriptions/"):
        return _generalize_azure(value)
    if entity == "gcp_resource_name":
        return _generalize_gcp(value)
    size = strategy.opt("bucket")
    if size is not None and (bucket := _bucket(value, size)) is not None:
        return bucket
    return f"<{entity}>"


# --- the strategy table --------------------------------------------------------------------------------


@dataclass(slots=True)
class StrategyTable:
    """Looks a strategy up along a key chain; the first key present wins, else the default."""

    strategies: dict[str, Strategy]
    default: Strategy = KEEP
    allow_pseudonymize: bool = True
    _memo: dict[tuple[str, ...], Strategy] = field(default_factory=dict)

    def resolve(self, keys: tuple[str, ...]) -> Strategy:
        found = self._memo.get(keys)
        if found is None:
            found = next((self.strategies[k] for k in keys if k in self.strategies), self.default)
            if found.kind == "pseudonymize" and not self.allow_pseudonymize:
                found = KEEP
            self._memo[keys] = found
        return found

    @property
    def reversible(self) -> bool:
        if not self.allow_pseudonymize:
            return False
        return self.default.kind == "pseudonymize" or any(s.kind == "pseudonymize" for s in self.strategies.values())


def parse_strategies(table: Any, default: Any, path: str) -> tuple[dict[str, Strategy], Strategy]:
    """A `strategies` map (which may hold `default`) plus a separate `default` option."""
    if table is None:
        table = {}
    if not isinstance(table, Mapping):
        raise ValueError(f"{path}.strategies: must be a mapping of entity, detector or category to strategy")
    parsed: dict[str, Strategy] = {}
    fallback = KEEP
    for key, spec in table.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"{path}.strategies: keys must be non-empty strings")
        where = f"{path}.strategies.{key}" if re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", key) else f"{path}.strategies"
        if key == "default":
            fallback = parse_strategy(spec, where)
        else:
            parsed[key] = parse_strategy(spec, where)
    if default is not None:
        fallback = parse_strategy(default, f"{path}.default")
    return parsed, fallback
