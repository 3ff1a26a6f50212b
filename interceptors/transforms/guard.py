"""`guard_secrets`: a request whose arguments carry credentials is refused (or scrubbed) before it runs.

Argument names are scanned as well as values (`{"<a token>": 1}` is refused too), and so are the decoded views
the output redactor reads (bare base64, hex, `%XX`, gzip then base64, JSON inside strings, nested): a secret
spelled another way is still a secret. A model should pass references to secrets, never the secrets: a
credential in an argument has probably been lifted from an earlier result or from the user, and the tool is
the wrong place for it. A refusal names where the secret is (a JSON pointer) and its entity types, never it.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

import orjson

from ..errors import InterceptorsError
from .argvalues import ENTITY as ARGUMENT_ENTITY
from .argvalues import (
    KEY_IDS,
    MAX_DEPTH,
    VENDOR_NAMES,
    holds_secret,
    scrubbed,
    vendor_rules,
    without_terminal_codes,
)
from .base import Options, Transform, TransformContext, count
from .encoded import decode_base64, decode_gzip_base64, decode_hex, decode_percent
from .entities import CATEGORIES, fold_for_hints
from .keyrules import BUILTIN_KEY_RULES, BUILTIN_KEY_RULES_BY_NAME
from .normalize import needs_normalizing, normalize_for_matching
from .redactor import Redactor
from .triepattern import literal_alternation

URI_SEGMENT_KEY = "uri_segment"
"""The name a long path segment of a URI nobody named is judged under (`uri_segments`): not one that says opaque, so
the bare rule reads it as it reads a tool argument's whole value."""
MAX_SEGMENT = 64
"""A member name longer than this is cut in a refusal's path (it is the client's own text, but unbounded)."""
_PLAIN_SEGMENT = re.compile(r"[^\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]*")


class SecretsRefused(InterceptorsError, ValueError):
    """A request (or a client's answer) carried secrets. The message names entity types and where they are (a JSON
    pointer into the params or the answer), never a value (map it to -32602)."""

    def __init__(self, entities: Iterable[str], path: str | None = None, subject: str = "Arguments appear") -> None:
        self.entities = sorted(set(entities))
        self.path = path
        where = "" if path is None else f" at '{path}'" if path else " at the top level"
        super().__init__(
            f"{subject} to contain secrets ({', '.join(self.entities)}){where}; refusing to process them. "
            "Pass resource references, never credentials."
        )

    @property
    def data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entities": list(self.entities)}
        if self.path is not None:
            out["path"] = self.path
        return out


def pointer_segment(key: Any) -> str:
    """One RFC 6901 segment (`~0`, `~1`), cut to `MAX_SEGMENT` characters; a name with control or invisible
    characters becomes `<unprintable>`."""
    text = key if isinstance(key, str) else str(key)
    if not _PLAIN_SEGMENT.fullmatch(text):
        return "<unprintable>"
    if len(text) > MAX_SEGMENT:
        text = text[: MAX_SEGMENT - 1] + "…"
    return text.replace("~", "~0").replace("/", "~1")


def guarded_key_rules(categories: Iterable[str]) -> list[str]:
    """The built-in key rules the guard applies: `sensitive_key`, and every rule whose category it guards."""
    wanted = set(categories)
    return [rule.name for rule in BUILTIN_KEY_RULES if rule.name == "sensitive_key" or rule.category in wanted]


def _longest_part(key: str) -> str:
    """A word every key that normalises to `key` spells (lower-cased) in its text: its longest `_` part."""
    return max(key.split("_"), key=len)


MAX_JSON_LAYERS = 3
"""A string holding JSON text of a string (`"\\"{...}\\""`) is unwrapped this many layers deep."""


def _encoded_view(text: str) -> Any:
    """The JSON structure (object or array) that `text` spells in base64, hex, `%XX` or gzip then base64, or None:
    the redactor reads such a decoded view as text, where a JSON string's escaped quotes (`\\"`) hide a value
    from the patterns that need them (`CURLOPT_PASSWORD, "…"`). A decoded text with terminal codes is returned
    without them (a string): the redactor's decoded view keeps them, and a code glued to a key hides its start."""
    if len(text) < 8 or text[:1] in ("{", "[", '"'):
        return None
    for decode in (decode_base64, decode_gzip_base64, decode_hex, decode_percent):
        try:
            got = decode(text)
        except (ValueError, TypeError):
            continue
        spelled = got[0].strip() if got is not None else ""
        if spelled[:1] in ("{", "[") and spelled[-1:] in ("}", "]"):
            try:
                parsed = orjson.loads(spelled)
            except orjson.JSONDecodeError:
                continue
            if isinstance(parsed, dict | list):
                return parsed
        plain = without_terminal_codes(spelled) if spelled else None
        if plain is not None:
            return plain
    return _coded_text(text)


_HEX_BYTES = re.compile(r"(?:[0-9a-f]{2})+|(?:[0-9A-F]{2})+")
_BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{12,}={0,2}|[A-Za-z0-9_-]{12,}={0,2}")
MAX_CODED = 1 << 16
"""A decoded text with terminal codes is read up to this many bytes (gzip's output is cut there)."""


def _coded_text(text: str) -> str | None:
    """What `text` spells in hex, `%XX`, base64 or gzip then base64, without its terminal codes, when that is UTF-8
    text with raw terminal codes (ESC): the shared decoders refuse control characters, so a line coloured for a
    terminal (`ESC[93msk-…ESC[0m`) would be judged only as spelled when it is encoded. None otherwise."""
    raw: bytes | None = None
    if "%" in text:
        if "%1b" in text or "%1B" in text:
            raw = unquote_to_bytes(text)
    elif _HEX_BYTES.fullmatch(text) is not None:
        if "1b" in text or "1B" in text:
            raw = bytes.fromhex(text)
    elif len(text) <= 4 * MAX_CODED and _BASE64_RUN.fullmatch(text) is not None:
        body = text.rstrip("=")
        altchars = b"-_" if "-" in body or "_" in body else None
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=altchars)
        except (binascii.Error, ValueError):
            return None
        if raw[:2] == b"\x1f\x8b":
            try:
                raw = zlib.decompressobj(wbits=31).decompress(raw, MAX_CODED)
            except zlib.error:
                return None
    if raw is None or b"\x1b" not in raw:
        return None
    try:
        decoded = raw[:MAX_CODED].decode("utf-8")
    except UnicodeDecodeError:
        return None
    return without_terminal_codes(decoded)


def _unwrap_json_strings(value: Any, depth: int = 0) -> Any:
    """`value` with every string that is the JSON text of a string replaced by what it spells (again, while it
    still is one, `MAX_JSON_LAYERS` at most): the redactor parses JSON inside a string once, so an object
    encoded twice reaches it as text, where a key rule (a JWK's `d` beside `kty`) cannot see it. A string with
    terminal codes is read without them. The same object back when there is nothing to unwrap."""
    if isinstance(value, str):
        text = value.strip()
        layers = 0
        while layers < MAX_JSON_LAYERS and len(text) > 2 and text[0] == '"' and text[-1] == '"':
            try:
                inner = orjson.loads(text)
            except orjson.JSONDecodeError:
                break
            if not isinstance(inner, str):
                break
            text, layers = inner.strip(), layers + 1
        if layers:
            return text
        spelled = _encoded_view(text)
        if spelled is None:
            plain = without_terminal_codes(value)  # a colour code glued to a key hides its start from a detector
            return value if plain is None else plain
        return value if depth >= 64 else _unwrap_json_strings(spelled, depth + 1)
    if depth >= 64:
        return value
    if isinstance(value, Mapping):
        items = {key: _unwrap_json_strings(item, depth + 1) for key, item in value.items()}
        return value if all(items[k] is value[k] for k in value) else items
    if isinstance(value, list):
        out = [_unwrap_json_strings(item, depth + 1) for item in value]
        return value if all(a is b for a, b in zip(out, value, strict=True)) else out
    return value


class SecretGuard(Transform):
    type = "guard_secrets"
    direction = "input"
    OPTIONS = (
        "action", "argument_values", "categories", "custom_detectors", "decode", "disabled_detectors", "min_confidence",
        "uri_segments",
    )  # fmt: skip

    def __init__(
        self, options: Mapping[str, Any], path: str = "guard_secrets", transform_id: str | None = None
    ) -> None:
        super().__init__(transform_id)
        opts = Options(self.type, options, self.OPTIONS, path)
        self.action = opts.choice("action", "reject", ("reject", "redact"))
        categories = opts.strings("categories", ("secret", "credential"))
        if not categories or any(c not in CATEGORIES for c in categories):
            raise ValueError(f"{path}.categories: must be a non-empty list of {', '.join(CATEGORIES)}")
        self.categories = categories
        self.decode = opts.flag("decode", True)
        self.argument_values = opts.flag("argument_values", True)
        """The guard's own rules for argument values (`argvalues`): a whole value that is one random token, a
        labelled value in a line, a vendor's token judged strictly. Only asked when the detectors found nothing."""
        self.uri_segments = opts.flag("uri_segments", True)
        """A path's long segments judged as a tool argument's whole value (`URI_SEGMENT_KEY`), so a random token in
        one is refused: in a `file:` root's URI, and in a requested URI's part that its template names a path
        (`{path}`, `{+path}`, `{uri}`, `{name}`)."""
        rules = guarded_key_rules(categories)
        disabled = list(opts.strings("disabled_detectors", KEY_IDS))
        options = {
            "strategies": {category: "redact" for category in categories},
            # The 0.5 high-entropy heuristic would refuse every opaque id a model passes along; 0.75 keeps a
            # labelled key (`api_key: …`), which a model has no reason to pass on.
            "min_confidence": opts.number("min_confidence", 0.75, 0.0, 1.0),
            "scan_keys": True,  # a credential used as an argument name is still a credential
            "tags": False,
            "name_mentions": False,
            "decode": self.decode,  # the output redactor's decoded views: base64, hex, %XX, gzip
            "custom_detectors": opts.items("custom_detectors"),
            "disabled_detectors": disabled,
        }
        # Vendor tokens judged strictly (`argvalues.vendor_token`): the guarded categories' built-in formats, but
        # those the guard was told to leave alone.
        self._vendors = vendor_rules(frozenset(disabled) if "secret" in categories else frozenset(VENDOR_NAMES))
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

    def findings(
        self, value: Any, ctx: TransformContext | None = None, key: str | None = None, *, strict: bool = False
    ) -> tuple[Any, dict[str, int]]:
        """The scrubbed value and `{entity: count}` of what was found (an empty dict: the same object back). `key`:
        the name `value` was given under, when it is a bare member (a completion argument's value). `strict`: a
        channel that carries no documents (`STRICT_CHANNELS`): a vendor's token is refused whatever its body looks
        like (`argvalues.vendor_token`), where the detectors spare a documentation sample by its shape."""
        probe = TransformContext(direction="input")
        if ctx is not None:
            probe.kind, probe.principal, probe.pseudonymizer = ctx.kind, ctx.principal, ctx.pseudonymizer
        new = self._redactor_for(value).apply(value, probe)
        found: dict[str, int] = dict(probe.report.get("redacted", {}))
        if not found and self.decode:
            unwrapped = _unwrap_json_strings(value)
            if unwrapped is not value:  # JSON text of JSON text (or encoded): judged as the object it spells
                got = self.findings(unwrapped, ctx, key, strict=strict)
                if got[1]:
                    return got
        depth = 0 if self.decode else MAX_DEPTH
        vendors = self._vendors if strict else None
        if not found and self.argument_values and holds_secret(value, key, depth=depth, vendors=vendors):
            return scrubbed(value, key, depth=depth, vendors=vendors), {ARGUMENT_ENTITY: 1}
        return (value, {}) if not found else (new, found)

    def locate(self, value: Any, base: str = "", ctx: TransformContext | None = None, *, strict: bool = False) -> str:
        """The JSON pointer (under `base`) of the deepest member of `value` in which a secret is found on its own:
        a member is tried with its name (key rules read it), a list item under its list's name. Where no single
        member holds it (a key rule that needs a sibling, such as a JWK's `d` beside `kty`) the container's
        pointer is the answer. A member whose name is itself a secret is never named: its container is."""
        path = base
        key: Any = None
        node = value
        while True:
            if isinstance(node, Mapping):
                step = None
                for name, item in node.items():
                    if self.findings({name: item}, ctx, strict=strict)[1]:
                        step = (name, item)
                        break
                if step is None or (isinstance(step[0], str) and self.findings(step[0], ctx, strict=strict)[1]):
                    return path
                key, node = step
                path = f"{path}/{pointer_segment(key)}"
            elif isinstance(node, list):
                for index, item in enumerate(node):
                    probe = {key: item} if isinstance(key, str) else item
                    if self.findings(probe, ctx, strict=strict)[1]:
                        node = item
                        path = f"{path}/{index}"
                        break
                else:
                    return path
            else:
                return path

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        new, found = self.findings(value, ctx)
        if not found:
            return value
        if self.action == "reject":
            raise SecretsRefused(found)
        for entity, amount in found.items():
            count(ctx.report, "redacted_arguments", entity, amount)
        return new
