"""The vault as SEP-2624 interceptors: reverse tokens on the way in, re-pseudonymise echoes on the way out.

- `<prefix>depseudonymize`, a request-phase mutator on tools/call (arguments), resources/read (the URI),
  prompts/get (arguments) and completion/complete (the value and the context arguments). It turns tokens
  (and aliases) the model wrote back into real values, in the caller's namespace, and records the
  `(real, token)` pairs of the operation in the vault.
- `<prefix>repseudonymize`, a response-phase mutator on the same events. Request and response are separate
  invocations, so it finds the pairs again by the operation's key (namespace, session id and trace id of
  the invocation context) and swaps every restored real value of 3+ characters that a tool echoes back to
  its token: in content text, links, embedded resources, structured content, `_meta`, resource contents,
  prompt messages, completion values, and the gateway's result-shaped error, progress and log payloads.
  It runs last (highest response priority), after every other output stage.

Matching is deliberately greedy on the way out: any occurrence, inside a longer word too, in any case,
JSON-escaped or percent-encoded, is replaced. Mangling a word that merely contains a restored value is
the price of never leaking it.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import orjson

from ..outcomes import Mutation
from ..protocol.methods import METHODS, Stage
from ..registry import Invocation, Registry
from ..wire import InvocationContext
from . import echoes
from .store import Pair
from .taint import Taint
from .vault import TokenVault

logger = logging.getLogger("interceptors.vault")

EVENTS = METHODS.names(Stage.VAULT)
CHANNEL_META_KEY = "io.mcp-interceptors/channel"
RESERVED_META = frozenset({CHANNEL_META_KEY, "io.mcp-interceptors/transforms", "progressToken"})
STRUCTURAL_KEYS = frozenset({"type", "mimeType", "blob", "role", "annotations", "isError", "progressToken"})
BINARY_BLOCKS = frozenset({"image", "audio"})
MIN_ECHO = 3
"""Restored values shorter than this are not looked for in output (they would match everywhere)."""
REQUEST_PRIORITY = -1_000
"""Before the transforms' input stage (priority 0), so every reversal is recorded here; validators (the policy,
`guard_secrets` in reject mode) run before any request mutator and still see what the model sent."""
RESPONSE_PRIORITY = 1_000_000_000
"""Last of all response mutators."""


def principal_of(context: InvocationContext | None) -> str | None:
    principal = context.principal if context is not None else None
    return principal.id if principal is not None else None


def operation_key(context: InvocationContext | None, namespace: str) -> str | None:
    """What the request and response phases of one operation both see; None when there is nothing."""
    if context is None or (context.trace_id is None and context.session_id is None):
        return None
    # The span id too: requests of one W3C trace share its trace id.
    return "\x1f".join((namespace, context.session_id or "", context.trace_id or "", context.span_id or ""))


# --- walking payloads ---------------------------------------------------------------------------------------

Rewrite = Callable[[str], str]


def rewrite_all(value: Any, fn: Rewrite, *, keys: bool = True) -> Any:
    """Every string (and, with `keys`, every dict key) rewritten; the same object when nothing changed."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        items = [rewrite_all(v, fn, keys=keys) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = fn(key) if keys and isinstance(key, str) else key
            new_item = rewrite_all(item, fn, keys=keys)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    return value


def rewrite_result(value: Any, fn: Rewrite) -> Any:
    """A result's strings rewritten, leaving its structure alone: block types, MIME types, roles, binary data
    and our own `_meta` keys. Structured content and `_meta` values are rewritten whole (keys too)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        items = [rewrite_result(v, fn) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if not isinstance(value, dict):
        return value
    binary = value.get("type") in BINARY_BLOCKS
    changed = False
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key in STRUCTURAL_KEYS or (binary and key == "data"):
            new = item
        elif key == "structuredContent":
            new = rewrite_all(item, fn)
        elif key == "_meta" and isinstance(item, dict):
            meta = {k: v if k in RESERVED_META else rewrite_all(v, fn) for k, v in item.items()}
            new = item if all(meta[k] is item[k] for k in item) else meta
        else:
            new = rewrite_result(item, fn)
        changed = changed or new is not item
        out[key] = new
    return out if changed else value


# --- the input side --------------------------------------------------------------------------------------------


class Depseudonymizer:
    """Tokens (and aliases) back to real values, in one namespace; unknown text passes unchanged."""

    def __init__(self, vault: TokenVault, aliases: Mapping[str, str] | None = None, *, keys: bool = False) -> None:
        self.vault = vault
        self.aliases = {str(k): str(v) for k, v in (aliases or {}).items() if k}
        self.keys = keys
        self._alias_finder = (
            re.compile(
                r"(?<![\w-])(?:"
                + "|".join(re.escape(a) for a in sorted(self.aliases, key=len, reverse=True))
                + r")(?![\w-])"
            )
            if self.aliases
            else None
        )

    def text(self, text: str, namespace: str, pairs: list[Pair]) -> str:
        if self._alias_finder is None:  # tokens only: one lookup does the exact and the embedded ones
            restored, found = self.vault.detokenize_text(text, namespace)
            pairs.extend(found)
            return restored if found else text
        entry = self.vault.entry(text, namespace)
        if entry is not None:
            pairs.append((entry.value, text))
            return entry.value
        current = text
        real = self.aliases.get(text)
        if real is not None:
            pairs.append((real, text))
            return real
        if self._alias_finder is not None:

            def swap(match: re.Match[str]) -> str:
                found = self.aliases[match.group(0)]
                pairs.append((found, match.group(0)))
                return found

            current = self._alias_finder.sub(swap, current)
        restored, found_pairs = self.vault.detokenize_text(current, namespace)
        if found_pairs:
            pairs.extend(found_pairs)
            current = restored
        return text if current == text else current

    def value(self, value: Any, namespace: str, pairs: list[Pair]) -> Any:
        return rewrite_all(value, lambda s: self.text(s, namespace, pairs), keys=self.keys)

    def params(self, event: str, params: Mapping[str, Any], namespace: str, pairs: list[Pair]) -> Mapping[str, Any]:
        """The request params with tokens reversed where a tool, resource or completion reads them."""
        out = dict(params)
        if event in ("tools/call", "prompts/get"):
            if "arguments" in params:
                out["arguments"] = self.value(params["arguments"], namespace, pairs)
        elif event == "resources/read":
            uri = params.get("uri")
            if isinstance(uri, str):
                out["uri"] = self.text(uri, namespace, pairs)
        elif event == "completion/complete":
            argument = params.get("argument")
            if isinstance(argument, Mapping) and isinstance(argument.get("value"), str):
                value = self.text(argument["value"], namespace, pairs)
                if value is not argument["value"]:
                    out["argument"] = {**argument, "value": value}
            context = params.get("context")
            if isinstance(context, Mapping) and isinstance(context.get("arguments"), Mapping):
                restored = self.value(context["arguments"], namespace, pairs)
                if restored is not context["arguments"]:
                    out["context"] = {**context, "arguments": restored}
        return params if all(out.get(k) is params.get(k) for k in out) else out


# --- the output side ----------------------------------------------------------------------------------------------


def _variants(real: str, token: str) -> list[tuple[str, str]]:
    """The forms a restored value may take in output, each with the token in the same form."""
    forms = [(real, token)]
    escaped = orjson.dumps(real).decode()[1:-1]
    if escaped != real:
        forms.append((escaped, orjson.dumps(token).decode()[1:-1]))
    for safe in ("", "/"):
        encoded = quote(real, safe=safe)
        if encoded != real:
            forms.append((encoded, quote(token, safe=safe)))
    return forms


DIGESTS = ("md5", "sha1", "sha256", "sha512")


def _digests(real: str, token: str) -> list[tuple[str, str]]:
    """The value's common digests (hex, base64), each with the token's: a tool may answer with a hash of what it
    got, and the client could test guesses against it."""
    forms = []
    for name in DIGESTS:
        value = hashlib.new(name, real.encode("utf-8", "surrogatepass")).digest()
        other = hashlib.new(name, token.encode("utf-8", "surrogatepass")).digest()
        forms.append((value.hex(), other.hex()))
        forms.append((base64.b64encode(value).decode(), base64.b64encode(other).decode()))
    return forms


class Repseudonymizer:
    """Swaps restored real values back to their tokens wherever they appear, in any spelling the leak checks
    decode (see `echoes`): as they are in any case, JSON-escaped, percent-encoded, reversed, spelled out, and
    inside base64, hex, percent, JSON and HTML layers, nested."""

    def __init__(self, pairs: Iterable[Pair], min_length: int = MIN_ECHO) -> None:
        table: dict[str, str] = {}
        reals: list[str] = []
        spaced: dict[str, str] = {}
        for real, token in pairs:
            if len(real) < min_length or real == token:
                continue
            reals.append(real)
            for form, replacement in _variants(real, token):
                table.setdefault(form, replacement)
            table.setdefault(real[::-1], token[::-1])
            for form, replacement in _digests(real, token):  # a digest oracle answers over tokens only
                table.setdefault(form, replacement)
            spaced.setdefault(real.casefold(), token)
            spaced.setdefault(real[::-1].casefold(), token[::-1])
        self.table = table
        self._folded = {form.lower(): rep for form, rep in table.items()}
        self._pattern = (
            re.compile("|".join(re.escape(f) for f in sorted(table, key=len, reverse=True)), re.IGNORECASE)
            if table
            else None
        )
        self._spaced_tokens = spaced
        self._spaced = echoes.spaced_pattern(list(spaced))
        self._layers = echoes.Layers(self._text, reals)

    def __bool__(self) -> bool:
        return self._pattern is not None

    def _replacement(self, match: re.Match[str]) -> str:
        found = match.group(0)
        exact = self.table.get(found) or self._folded.get(found.lower())
        if exact is not None:
            return exact
        for form, replacement in self.table.items():  # case folding beyond str.lower (rare)
            if re.fullmatch(re.escape(form), found, re.IGNORECASE):
                return replacement
        return found

    def _spaced_replacement(self, match: re.Match[str]) -> str:
        squeezed = echoes.squeeze(match.group(0))
        for value, token in self._spaced_tokens.items():
            if echoes.squeeze(value) == squeezed:
                return token
        return next(iter(self._spaced_tokens.values()))  # it matched some value: never let it through

    def _text(self, text: str, depth: int) -> str:
        if self._pattern is None or not text:
            return text
        new = self._pattern.sub(self._replacement, text)
        if self._spaced is not None:
            new = self._spaced.sub(self._spaced_replacement, new)
        new = self._layers.rewrite(new, depth)
        return text if new == text else new

    def text(self, text: str) -> str:
        return self._text(text, 0)

    def result(self, payload: Any) -> Any:
        return rewrite_result(payload, self.text)


@functools.lru_cache(maxsize=512)
def _repseudonymizer(pairs: tuple[Pair, ...]) -> Repseudonymizer:
    return Repseudonymizer(pairs)


@functools.lru_cache(maxsize=512)
def _taint(pairs: tuple[Pair, ...]) -> Taint:
    return Taint(pairs, MIN_ECHO)


WITHHELD = (
    "result withheld by the vault: this call received real values in place of pseudonyms, and its result "
    "{why} (doc/VAULT.md)"
)
WHY_FOUND = "still held one of them in a form that cannot be swapped back"
WHY_POLICY = "is not shown (vault.restored_results: withhold)"


def _readable(payload: Any) -> Any:
    """What a client reads of a result: all of it but our own `_meta` keys."""
    if isinstance(payload, Mapping) and isinstance(payload.get("_meta"), Mapping):
        meta = {k: v for k, v in payload["_meta"].items() if k not in RESERVED_META}
        return {**payload, "_meta": meta}
    return payload


def withheld(event: str, payload: Any, why: str) -> dict[str, Any]:
    """A result of the event's shape that carries nothing from `payload` but our own `_meta` keys."""
    meta = payload.get("_meta") if isinstance(payload, Mapping) else None
    kept = {k: v for k, v in meta.items() if k in RESERVED_META} if isinstance(meta, Mapping) else {}
    text = WITHHELD.format(why=why)
    out: dict[str, Any]
    if event == "resources/read":
        out = {"contents": []}
    elif event == "prompts/get":
        out = {"description": text, "messages": []}
    elif event == "completion/complete":
        out = {"completion": {"values": [], "hasMore": False}}
    else:
        out = {"content": [{"type": "text", "text": text}], "isError": True}
    if kept:
        out["_meta"] = kept
    return out


def is_final(payload: Any) -> bool:
    """A result or an error ends an operation; progress and log payloads do not."""
    if not isinstance(payload, Mapping):
        return True
    meta = payload.get("_meta")
    channel = meta.get(CHANNEL_META_KEY) if isinstance(meta, Mapping) else None
    return channel not in ("progress", "log")


# --- the stages -----------------------------------------------------------------------------------------------------


def target_name(event: str, params: Mapping[str, Any]) -> str:
    """The tool or prompt name, the resource URI, or the completion's reference (name or URI), as sent."""
    if event == "resources/read":
        value = params.get("uri")
    elif event == "completion/complete":
        ref = params.get("ref")
        value = (ref.get("name") or ref.get("uri")) if isinstance(ref, Mapping) else None
    else:
        value = params.get("name")
    return value if isinstance(value, str) else ""


class VaultStages:
    """The handlers behind the registered interceptors (usable directly, without a chain)."""

    def __init__(self, vault: TokenVault, *, aliases: Mapping[str, str] | None = None, keys: bool = False) -> None:
        self.vault = vault
        self.depseudonymizer = Depseudonymizer(vault, aliases, keys=keys)
        self._warned = False

    def namespace(self, invocation: Invocation) -> str:
        return self.vault.namespace_for(principal_of(invocation.context))

    def request(self, invocation: Invocation) -> Mutation:
        payload = invocation.payload
        if not isinstance(payload, Mapping) or not isinstance(payload.get("params"), Mapping):
            return Mutation.unchanged()
        if not self.restores_to(invocation.event, payload["params"]):
            return Mutation.unchanged()  # this target gets the tokens as the model wrote them
        namespace = self.namespace(invocation)
        pairs: list[Pair] = []
        params = self.depseudonymizer.params(invocation.event, payload["params"], namespace, pairs)
        if pairs:
            key = operation_key(invocation.context, namespace)
            if key is not None:
                self.vault.remember(key, pairs)
            elif not self._warned:
                self._warned = True
                logger.warning(
                    "vault: an operation without a trace or session id restored values; echoes of them cannot be "
                    "re-pseudonymised (give the chain an invocation context)"
                )
        if params is payload["params"]:
            return Mutation.unchanged()
        return Mutation({**payload, "params": dict(params)}, True)

    def restores_to(self, event: str, params: Mapping[str, Any]) -> bool:
        """Whether the operation's target may receive real values (`vault.restore_to`; empty: none)."""
        return self.vault.restores(target_name(event, params))

    def response(self, invocation: Invocation) -> Mutation:
        try:
            key = operation_key(invocation.context, self.namespace(invocation))
            pairs = self.vault.recall(key) if key is not None else []
            if not pairs:
                return Mutation.unchanged()
            if key is not None and is_final(invocation.payload):
                self.vault.operation_done(key)
            if self.vault.restored_results == "withhold":
                return Mutation(withheld(invocation.event, invocation.payload, WHY_POLICY), True)
            new = _repseudonymizer(tuple(pairs)).result(invocation.payload)
            if _taint(tuple(pairs)).found_in(_readable(new)):  # the backstop: a spelling the swap does not know
                logger.warning("vault: a restored value was found in a form that cannot be swapped back: withheld")
                return Mutation(withheld(invocation.event, new, WHY_FOUND), True)
            return Mutation.unchanged() if new is invocation.payload else Mutation(new, True)
        finally:
            self._autosave()

    def _autosave(self) -> None:
        try:
            self.vault.maybe_autosave()
        except Exception as exc:  # a full disk must not block what the model reads; the next pass retries
            logger.warning("vault %s: autosave failed: %s", self.vault.key_id, type(exc).__name__)


def vault_registry(
    vault: TokenVault,
    *,
    name_prefix: str = "vault/",
    aliases: Mapping[str, str] | None = None,
    keys: bool = False,
    events: Sequence[str] = EVENTS,
    request_priority: int = REQUEST_PRIORITY,
    response_priority: int = RESPONSE_PRIORITY,
    registry: Registry | None = None,
) -> Registry:
    """A registry with the vault's request mutator (reverse tokens) and response mutator (re-pseudonymise).

    `aliases` maps alias text to real text (reversed before embedded tokens); `keys` also reverses dict keys
    of arguments. Put it next to the transforms' registry (which issues the tokens through the same vault).
    """
    chosen = tuple(e for e in events if e in EVENTS)
    if not chosen:
        raise ValueError(f"events must be among {', '.join(EVENTS)}")
    stages = VaultStages(vault, aliases=aliases, keys=keys)
    target = registry if registry is not None else Registry()
    inline = not vault.performs_io  # CPU only: skip the worker thread (large payloads still get one)
    target.register(
        stages.request,
        name=f"{name_prefix}depseudonymize",
        type="mutation",
        events=chosen,
        phase="request",
        priority={"request": request_priority},
        inline=inline,
        description="Reverses pseudonyms in arguments, URIs and completion values, in the caller's namespace.",
    )
    target.register(
        stages.response,
        name=f"{name_prefix}repseudonymize",
        type="mutation",
        events=chosen,
        phase="response",
        priority={"response": response_priority},
        inline=inline,
        description="Puts the tokens back wherever a restored real value is echoed in what a model reads.",
    )
    return target
