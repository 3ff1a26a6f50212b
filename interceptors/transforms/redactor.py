"""`redact`: finds sensitive values by key and by content and applies the configured strategies.

One run covers every part of a result (structured content, text blocks, links, `_meta`), so a value
replaced in one part is replaced the same way everywhere, including mentions of it in free text.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import pairwise
from typing import Any

import orjson

from .base import Options, Transform, TransformContext, count
from .catalog import BUILTIN_BY_NAME, BUILTIN_DETECTORS
from .context import GENERIC, SCHEME_TYPES, Context, binary_field, describes
from .detectors import Detector, Finding, Scanner, detector_from_config, merge_detectors
from .encoded import MARKER_KEYS, MAX_DEPTH, UNDECODED, Decoder
from .entities import entity_chain, fold_for_hints, is_template, normalize_key
from .jsonspans import rewrite as rewrite_json
from .keyrules import (
    BUILTIN_KEY_RULES,
    BUILTIN_KEY_RULES_BY_NAME,
    ENUM_KEYS,
    PERSON_TAG_KEYS,
    TAG_CONTAINERS,
    TAG_KEY_ALLOWLIST,
    KeyRule,
    key_rule_from_config,
    looks_like_secret_value,
)
from .normalize import needs_normalizing, normalize_for_matching
from .strategies import DROP, KEEP, Env, Strategy, StrategyTable, check_template, parse_strategies
from .tails import with_wrapped_tails
from .triepattern import literal_alternation
from .verify import CHECKED, verdict

REDACT_OPTIONS = (
    "strategies", "default", "custom_detectors", "disabled_detectors", "key_rules", "extra_key_rules",
    "min_confidence", "scan_keys", "tags", "tag_key_allowlist", "skip_keys", "allow_pseudonymize", "redact_template",
    "hash_template", "cache_size", "name_mentions", "structured_text", "exempt_keys", "decode", "context",
)  # fmt: skip
DEFAULT_SKIP_KEYS = ("_annotations",)
"""`_meta` and cursors are scanned too (cursors by real detectors only, see `_OPAQUE_KEYS`); our own report key
never reaches a transform (the channels leave it out)."""
# Keys whose values are opaque by design (pagination cursors) or digests: the entropy fallback stays out.
_OPAQUE_KEYS = frozenset(
    {"cursor", "next_cursor", "prev_cursor", "page_token", "next_page_token", "prev_page_token", "continuation_token",
     "sync_token", "resume_token", "next_token", "start_token", "pagination_token", "page_cursor", "end_cursor",
     "start_cursor", "after", "before", "next", "marker", "next_marker", "offset_token"}
)  # fmt: skip
_HASH_KEY = re.compile(
    r"(?:^|_)(?:sha\d*|md5|hash|hashes|digest|checksum|integrity|etag|fingerprint|crc\d*|blake\d*\w*|xxhash|"
    r"node_id|commit|tree|parents?|revision|rev|oid|object_id|trace_id|span_id|nonce|salt_id)(?:_|$)"
    # ids: what names a thing is no credential (a session or a secret id may be one: those stay scanned in full)
    r"|(?<!secret_)(?<!session_)(?<!sess_)(?:^|_)(?:ids?|uid|guid|ulid|ksuid|host_id|request_id|version_id|receipt_handle)$"
)
# Entities whose replaced values are not chased through the rest of the payload: secrets have no
# business being mentioned anywhere else, and tag values and chunk ids are too generic to chase.
_NO_MENTION = frozenset({"sensitive_field", "tag_value", "person", "rag_chunk_id", "rag_content"})
_MENTION_LIMIT = 5000
_JWK_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "k"})
_TEXT_BLOCK_LABEL = re.compile(r"content\[(\d+)\]\.text")
_BACKSLASHES = re.compile(r"\\{2,}")
_SEAM = 1024
"""How much of each side of a seam between adjacent text blocks is read together."""
_MIN_MARKED = 7
"""The shortest text `decode` could find something in (`/?a=%41`)."""
_SAME: Any = object()
"""A cached string result: the text came out unchanged."""
_FREE_TEXT_MARK = re.compile(r"[ ,\n]|->")
_RAG_LINE = re.compile(r"^(\s*)(Resource|Account|Tags)(\s*:\s*)(.*)$")


class Redactor(Transform):
    type = "redact"

    def __init__(
        self,
        options: Mapping[str, Any],
        path: str = "redact",
        transform_id: str | None = None,
        *,
        catalog: Sequence[Detector] = BUILTIN_DETECTORS,
        code_strategies: Mapping[str, Strategy] | None = None,
    ) -> None:
        """`catalog` and `code_strategies` are for configurations built in code (never from a policy)."""
        super().__init__(transform_id)
        opts = Options(self.type, options, REDACT_OPTIONS, path)
        strategies, default = parse_strategies(options.get("strategies"), options.get("default"), path)
        strategies.update(code_strategies or {})
        self.table = StrategyTable(strategies, default, opts.flag("allow_pseudonymize", True))
        self.min_confidence = opts.number("min_confidence", 0.0, 0.0, 1.0)
        custom = [
            detector_from_config(item, f"{path}.custom_detectors[{i}]")
            for i, item in enumerate(opts.items("custom_detectors"))
        ]
        names = [d.name for d in custom]
        if len(set(names)) != len(names):
            raise ValueError(f"{path}.custom_detectors: detector names must be unique")
        disabled = opts.strings("disabled_detectors", ())
        self.detectors: tuple[Detector, ...] = tuple(
            d for d in merge_detectors(catalog, custom, disabled) if self._detector_active(d)
        )
        self.scanner = Scanner(self.detectors)
        self.key_rules = self._key_rules(opts, path)
        self.scan_keys = opts.flag("scan_keys", True)
        self.tags = opts.flag("tags", True)
        self.tag_allowlist = frozenset(normalize_key(k) for k in opts.strings("tag_key_allowlist", TAG_KEY_ALLOWLIST))
        self.skip_keys = frozenset(opts.strings("skip_keys", DEFAULT_SKIP_KEYS))
        self.exempt_keys = frozenset(opts.strings("exempt_keys", ()))
        self.name_mentions = opts.flag("name_mentions", True)
        self.structured_text = opts.flag("structured_text", True)
        self.decoder = Decoder.from_option(options.get("decode", True), f"{path}.decode")
        self.context = Context.from_option(options.get("context", True), f"{path}.context")
        redact_template = opts.text("redact_template", "[REDACTED:{entity}]") or ""
        hash_template = opts.text("hash_template", "{entity}:{digest}") or ""
        self.redact_template = check_template(redact_template, ("entity", "length"), f"{path}.redact_template")
        self.hash_template = check_template(hash_template, ("entity", "digest"), f"{path}.hash_template")
        self.cache_size = opts.integer("cache_size", 200_000, 0) or 0
        self._cache: dict[tuple[str, str], tuple[Any, tuple[tuple[str, str], ...]]] = {}
        self._key_hints = self._hints_of_rules()
        self._key_hint: re.Pattern[str] | None = (
            None if self._key_hints is None else re.compile(literal_alternation(self._key_hints) or "(?!)")
        )
        self._rule_memo: dict[str, tuple[KeyRule, ...]] = {}
        self._opaque_memo: dict[str, bool] = {}
        self.content_hints = tuple(sorted({h for d in self.detectors for h in d.hints}))
        self.jwk_detector = next((d for d in self.detectors if d.name == "jwk_private_key"), None)
        """Reads a JSON Web Key's private members once its JSON text is parsed (its pattern needs the text)."""

    # --- construction --------------------------------------------------------------------------------

    def _detector_active(self, detector: Detector) -> bool:
        """A detector whose every outcome is `keep`, or below the confidence floor, is never run."""
        if detector.confidence < self.min_confidence:
            return False
        return any(not self.table.resolve(self._finding_keys(e, detector)).keep for e in detector.entities)

    @staticmethod
    def _finding_keys(entity: str, detector: Detector) -> tuple[str, ...]:
        return (*entity_chain(entity), detector.name, detector.category)

    @staticmethod
    def _rule_keys(rule: KeyRule, entity: str) -> tuple[str, ...]:
        keys = list(entity_chain(entity))
        if entity != rule.entity:
            keys.extend(entity_chain(rule.entity))
        keys.extend((rule.name, rule.category))
        return tuple(dict.fromkeys(keys))

    def _key_rules(self, opts: Options, path: str) -> tuple[KeyRule, ...]:
        selected = opts.raw.get("key_rules", True)
        rules: list[KeyRule]
        if selected is True:
            rules = list(BUILTIN_KEY_RULES)
        elif selected is False or selected is None:
            rules = []
        elif isinstance(selected, list) and all(isinstance(n, str) for n in selected):
            unknown = [n for n in selected if n not in BUILTIN_KEY_RULES_BY_NAME]
            if unknown:
                raise ValueError(f"{path}.key_rules: unknown key rule name(s)")
            rules = [BUILTIN_KEY_RULES_BY_NAME[n] for n in selected]
        else:
            raise ValueError(f"{path}.key_rules: must be true, false or a list of rule names")
        extra = [
            key_rule_from_config(r, f"{path}.extra_key_rules[{i}]") for i, r in enumerate(opts.items("extra_key_rules"))
        ]
        return tuple(r for r in [*extra, *rules] if self._rule_active(r))

    def _rule_active(self, rule: KeyRule) -> bool:
        if rule.confidence < self.min_confidence:
            return False
        return any(not self.table.resolve(self._rule_keys(rule, e)).keep for e in rule.possible_entities)

    def _hints_of_rules(self) -> tuple[str, ...] | None:
        """Lower-case words one of which a key must contain for a key rule or tag rule to act; None: no shortcut."""
        hints: list[str] = []
        for rule in self.key_rules:
            if rule.name != "sensitive_key":
                return None
            hints += ["pass", "pwd", "secret", "key", "token", "bearer", "credential", "auth", "cookie", "conn",
                      "sas", "signature", "userdata", "user_data", "kubeconfig", "pem"]  # fmt: skip
        tag_active = self.tags and not (
            self.table.resolve(("person", "pii")).keep and self.table.resolve(("tag_value", "free_text")).keep
        )
        if tag_active:
            hints += ["tag", "label"]
        return tuple(hints)

    @property
    def reversible(self) -> bool:
        return self.table.reversible

    # --- entry points ------------------------------------------------------------------------------------

    def apply(self, value: Any, ctx: TransformContext, label: str = "$") -> Any:
        return self.apply_all([value], ctx, [label])[0]

    def for_metadata(self) -> Redactor:
        """The same detectors without key-name rules: an input schema names its fields `token` or `password`
        without holding one, so only values are judged there (a twin with its own cache, made once)."""
        twin: Redactor | None = self.__dict__.get("_metadata_twin")
        if twin is None:
            twin = copy.copy(self)
            twin.key_rules = ()
            twin._rule_memo = {}
            twin._cache = {}
            self.__dict__["_metadata_twin"] = twin
        return twin

    def apply_all(self, values: Sequence[Any], ctx: TransformContext, labels: Sequence[str]) -> list[Any]:
        scanner, walk_needed, decoding = self._narrow(values)
        if not walk_needed:
            return list(values)
        if not scanner.detectors and not decoding and self._plain_texts(values, labels):
            return list(values)  # what the walk would find: no detector can match, no key rule has a key to read
        env = Env(ctx.pseudonymizer, ctx.namespace, self.redact_template, self.hash_template)
        run = _Run(self, scanner, env, decoding)
        values = run.seams(values, labels)
        out = [run.top(value) for value in values]
        if run.mentions and self.name_mentions:
            out = run.replace_mentions(out)
        for (section, entity), amount in run.counts.items():
            count(ctx.report, section, entity, amount)
        return out

    def _plain_texts(self, values: Sequence[Any], labels: Sequence[str]) -> bool:
        """Every part is a string that is not JSON text (so no key is read in it), and no two are text blocks
        whose seam the full scanner would read: with no detector left after narrowing, nothing can change."""
        structured = self.structured_text
        for value in values:
            if value.__class__ is not str or (structured and value.lstrip()[:1] in ("{", "[")):
                return False
        if len(values) < 2:
            return True
        return sum(1 for label in labels if _TEXT_BLOCK_LABEL.fullmatch(label) is not None) < 2

    def _narrow(self, values: Sequence[Any]) -> tuple[Scanner, bool, bool]:
        """One look at the whole payload decides which detectors can match anywhere in it, if any, and whether
        anything in it could be marked as encoded: (scanner, walk needed, decoding)."""
        try:
            raw = _payload_text(values)
        except TypeError:
            return self.scanner, True, self.decoder is not None
        if needs_normalizing(raw):  # a hint hidden by an escape or an invisible character still counts
            once = raw.replace("\\\\", "\\")
            raw = normalize_for_matching(once)[0]
            if "\\\\" in once:  # JSON text inside JSON text: an escape under an escaped backslash still spells a hint
                raw += "\n" + normalize_for_matching(_BACKSLASHES.sub("\\\\", once))[0]
        folded = fold_for_hints(raw)
        scanner = self.scanner.narrow(folded, raw)
        decoding = self.decoder is not None and self.decoder.may_apply(folded, raw)
        if scanner.detectors or decoding or self._key_hint is None:
            return scanner, True, decoding
        return scanner, self._key_hint.search(folded) is not None, decoding

    # --- pieces shared with the run ------------------------------------------------------------------------

    def strategy_for(self, finding: Finding) -> Strategy:
        return self.table.resolve(self._finding_keys(finding.entity, finding.detector))

    def opaque_key(self, normalized: str) -> bool:
        """A cursor or a digest key: its value is scanned without the entropy fallback."""
        known = self._opaque_memo.get(normalized)
        if known is None:
            if len(self._opaque_memo) > 65_536:
                self._opaque_memo.clear()
            known = self._opaque_memo[normalized] = (
                normalized in _OPAQUE_KEYS or _HASH_KEY.search(normalized) is not None
            )
        return known

    def rule_for(self, key: str, normalized: str, siblings: frozenset[str]) -> KeyRule | None:
        candidates = self._rule_memo.get(normalized)
        if candidates is None:
            if len(self._rule_memo) > 65_536:
                self._rule_memo.clear()
            candidates = self._rule_memo[normalized] = tuple(
                r for r in self.key_rules if r.matches(normalized, r.requires_sibling or frozenset())
            )
        for rule in candidates:
            if rule.requires_sibling and rule.requires_sibling.isdisjoint(siblings):
                continue
            if rule.category in ("secret", "credential") and key in self.exempt_keys:
                continue
            return rule
        return None


class _Run:
    """The state of one redaction run: the narrowed scanner, counts, and replaced identifier values."""

    __slots__ = ("cache", "counts", "decoding", "depth", "env", "mentions", "plain", "red", "scanner", "unkeyed")

    def __init__(self, red: Redactor, scanner: Scanner, env: Env, decoding: bool = False) -> None:
        self.red = red
        self.scanner = scanner
        self.env = env
        self.decoding = decoding  # the payload's text shows a marker `decode` reads (else nothing is looked at)
        self.depth = 0
        self.unkeyed = 0  # > 0 inside a mapping that describes (a security scheme, a public key): no key rules
        self.plain = 0  # > 0 while the scanner has no entropy fallback: cached apart (a string's result depends on it)
        self.counts: dict[tuple[str, str], int] = {}
        self.mentions: dict[str, tuple[str, str]] = {}
        self.cache = red._cache

    def seams(self, values: Sequence[Any], labels: Sequence[str]) -> Sequence[Any]:
        """Adjacent text blocks of one result read as one text: a secret split across two of them (`ghp_ab` then
        `cd…`, or a label in one and its value in the next) is found on the seam and replaced in both blocks,
        the replacement in the first and the rest of the secret cut from the second."""
        order = sorted(
            (int(m.group(1)), i)
            for i, label in enumerate(labels)
            if (m := _TEXT_BLOCK_LABEL.fullmatch(label)) is not None and isinstance(values[i], str)
        )
        if len(order) < 2:
            return values
        out = list(values)
        # Real detectors only: the entropy fallback would take two unrelated runs glued at the seam for one token
        # (a base64 blob at the end of one block, a word at the start of the next); it still reads each block.
        scanner = self.red.scanner.without_fallback()
        for (left_block, left), (right_block, right) in pairwise(order):
            if right_block != left_block + 1:
                continue
            head, tail = out[left], out[right]
            if not isinstance(head, str) or not isinstance(tail, str) or not head or not tail:
                continue
            before, after = head[-_SEAM:], tail[:_SEAM]
            seam = before + after
            cut = len(before)
            seam_findings = [f for f in scanner.scan(seam) if f.end > cut]
            if not seam_findings:
                continue
            # A block's own reading wins: a finding that overlaps one is that value read on into the other block
            # (`password: s3cret` then a base64 key), not a value split in two; taking it would move text across.
            # One exception: a vendor format (a fixed shape, not a label's greedy reading) that only carries a
            # single own reading on across the seam (same start, that reading cut off by the block's end, or the
            # mirror) is that token split in two.
            own = [(f.start, f.end) for f in scanner.scan(before)]
            own += [(f.start + cut, f.end + cut) for f in scanner.scan(after)]
            seam_findings = [
                f for f in seam_findings if _takes_the_seam(f.start, f.end, cut, own, f.detector.name not in GENERIC)
            ]
            if seam_findings and self.red.context is not None:
                seam_findings, _ = self.red.context.spare(seam, seam_findings)
            for finding in seam_findings:
                strategy = self.red.strategy_for(finding)
                if strategy.keep:
                    continue
                replacement = strategy.apply(finding.value, finding.entity, self.env, finding.detector.name)
                self.note(strategy, finding.entity)
                marker = replacement if isinstance(replacement, str) else "[REDACTED:content]"
                offset = len(head) - cut
                if finding.start < cut:
                    head = head[: offset + finding.start] + marker
                    tail = tail[finding.end - cut :]
                else:
                    tail = tail[: finding.start - cut] + marker + tail[finding.end - cut :]
                out[left], out[right] = head, tail
                break  # one seam finding per pair: the blocks changed, and what is left is scanned as usual
        return out

    def note(self, strategy: Strategy, entity: str, amount: int = 1) -> None:
        key = (strategy.report_section(), entity)
        self.counts[key] = self.counts.get(key, 0) + amount

    # --- values ------------------------------------------------------------------------------------------

    def top(self, value: Any) -> Any:
        """A part of a result: a string holding JSON is data; a dropped part becomes a marker or null."""
        result = self.value(value)
        if result is DROP:
            return "[REDACTED:content]" if isinstance(value, str) else None
        return result

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, dict):
            kind = value.get("type")
            if ("kty" in value or (kind.__class__ is str and kind in SCHEME_TYPES)) and (
                reason := self.described(value)
            ) in (
                "public_jwk",
                "security_scheme",
            ):
                return self.descriptive(reason, value)
            return self.mapping(value)
        if isinstance(value, list | tuple):
            return self.sequence(value)
        return value

    def sequence(self, items: list[Any] | tuple[Any, ...]) -> Any:
        out = []
        changed = False
        for item in items:
            new = self.string(item) if item.__class__ is str else self.value(item)  # (`value`'s first case, inline)
            if new is DROP:
                changed = True
                continue
            changed = changed or new is not item
            out.append(new)
        return out if changed or isinstance(items, tuple) else items

    def mapping(self, data: dict[Any, Any], encoded: Mapping[Any, str] | None = None, keyed: bool = True) -> Any:
        """`encoded`: keys whose values are encoded (the decoder's `fields`; None: ask the decoder). `keyed`: key
        rules apply to this mapping's own keys (not in one that describes a value, see `context.describes`)."""
        red = self.red
        keyed = keyed and not self.unkeyed
        normalized = {k: normalize_key(k) for k in data if isinstance(k, str)}
        siblings = frozenset(normalized.values())
        if encoded is None and self.decoding and ("kind" in data or not siblings.isdisjoint(MARKER_KEYS)):
            assert red.decoder is not None
            encoded = red.decoder.fields(data, normalized, siblings)
        out: dict[Any, Any] = {}
        changed = False
        # Loop invariants (the scanner and `decoding` are restored by whatever swaps them below): a key shorter than
        # `short` is what `string` gives back unchanged (too short for a finding, nothing marked to decode).
        skip_keys = red.skip_keys
        short = min(self.scanner.min_length, _MIN_MARKED) if self.decoding else self.scanner.min_length
        if not red.scan_keys:
            short = -1  # keys are not read at all
        binary_kept = red.context is not None
        jwk = red.jwk_detector if "kty" in data else None
        rules = bool(red.key_rules) and keyed
        tags = red.tags
        rule_memo, opaque_memo = red._rule_memo, red._opaque_memo
        for key, item in data.items():
            if key in skip_keys:
                out[key] = item
                continue
            new_key = key
            if isinstance(key, str):
                if 0 <= short <= len(key):
                    new_key = self.string(key, structured=False)
                    if new_key is DROP:
                        changed = True
                        continue
                    if new_key != key:
                        new_key = _unique_key(new_key, out)
                norm = normalized[key]
                new = UNDECODED
                if binary_kept and (key == "data" or key == "blob") and binary_field(key, data, item):
                    self.counts[("spared", "binary_payload")] = self.counts.get(("spared", "binary_payload"), 0) + 1
                    out[new_key] = item  # image or audio bytes, a resource blob: binary, not text to read
                    changed = changed or new_key is not key
                    continue
                if jwk is not None and norm in _JWK_PRIVATE and isinstance(item, str) and len(item) >= 16:
                    new = self.jwk_member(jwk, item)
                if new is UNDECODED and encoded and key in encoded and red.decoder is not None:
                    # decoded first: key rules apply inside
                    new = red.decoder.field(self, key, item, encoded[key])
                if new is UNDECODED:
                    # (the memos answered inline for the usual key: no rule could match it, not an opaque key)
                    rule = red.rule_for(key, norm, siblings) if rules and rule_memo.get(norm) != () else None
                    if rule is not None:
                        new = self.ruled(rule, item, norm)
                    elif opaque_memo.get(norm, True) and red.opaque_key(norm):
                        new = self.without_fallback(item)
                    elif tags and norm in TAG_CONTAINERS:
                        new = self.tag_container(item)
                    elif item.__class__ is str:
                        new = self.string(item)  # what `value` does with a string, one call fewer
                    else:
                        new = self.value(item)
            else:
                new = self.value(item)
            if new is DROP:
                changed = True
                continue
            changed = changed or new is not item or new_key is not key
            out[new_key] = new
        return out if changed else data

    # --- strings ----------------------------------------------------------------------------------------

    def string(self, text: str, structured: bool = True) -> Any:
        red = self.red
        # (`_json_text` looks past leading blanks for `{` or `[`: a text starting with neither is not JSON)
        if structured and red.structured_text and len(text) > 1 and (text[0] in "{[" or text[0].isspace()):
            parsed = _json_text(text)
            if parsed is not None:
                new = self.value(parsed)
                if new is DROP:
                    return DROP
                if new is parsed:
                    return text
                return rewrite_json(text, parsed, new)  # only the changed spans: the layout stays byte for byte
        marked = self.decoding and len(text) >= _MIN_MARKED and red.decoder is not None and red.decoder.marked(text)
        if len(text) < self.scanner.min_length and not marked:
            return text
        key = (self.env.namespace if not self.plain else self.env.namespace + "\x00plain", text)
        hit = self.cache.get(key)
        if hit is not None:
            result, notes = hit
            for section, entity in notes:
                self.counts[(section, entity)] = self.counts.get((section, entity), 0) + 1
            return text if result is _SAME else result  # the caller's own object: "unchanged" stays `is`
        if marked and red.decoder is not None:
            # Cached below only when nothing in it decodes; never when it was too deep to look.
            rewritten = red.decoder.rewrite(self, text) if self.depth < MAX_DEPTH else None
            if rewritten is not None:
                return self._around_decoded(*rewritten)
        result, note_list, stateful = self._replace(text, *self._spare(text, self.scanner.scan(text)))
        # A pseudonym depends on the vault (its key, its TTL bookkeeping), not only on the text: never cached.
        if red.cache_size and not stateful and not (marked and self.depth >= MAX_DEPTH):
            if len(self.cache) >= red.cache_size:
                self.cache.clear()
            self.cache[key] = (_SAME if result is text else result, note_list)
        for section, entity in note_list:
            self.counts[(section, entity)] = self.counts.get((section, entity), 0) + 1
        return result

    def _around_decoded(self, text: Any, decoded: list[tuple[int, int]]) -> Any:
        """Text whose encoded spans were redacted decoded: the rest is scanned with those spans blanked out (so a
        finding can neither start inside one nor run across one), not cached; the spans counted themselves."""
        if text is DROP:
            return DROP
        parts: list[str] = []
        last = 0
        for start, end in decoded:
            parts += (text[last:start], " " * (end - start))
            last = end
        parts.append(text[last:])
        starts = [start for start, _ in decoded]

        def clear(finding: Finding) -> bool:
            at = bisect_right(starts, finding.end - 1) - 1
            return at < 0 or decoded[at][1] <= finding.start

        blanked = "".join(parts)
        findings = [f for f in self.scanner.scan(blanked) if clear(f)]
        result, notes, _ = self._replace(text, *self._spare(blanked, findings))
        for section, entity in notes:
            self.counts[(section, entity)] = self.counts.get((section, entity), 0) + 1
        return result

    def nested(self, decoded: str, key: str | None) -> Any:
        """Decoded text, redacted as a string (or as the value of `key`, so key rules apply), or DROP."""
        saved, saved_decoding, saved_plain = self.scanner, self.decoding, self.plain
        # Neither narrowed nor gated: the payload's text did not show what the decoded text holds.
        self.scanner, self.decoding, self.plain = self.red.scanner, True, 0
        self.depth += 1
        try:
            if key is None:
                return self.string(decoded)
            out = self.mapping({key: decoded}, {})
            return next(iter(out.values())) if out else DROP
        finally:
            self.depth -= 1
            self.scanner, self.decoding, self.plain = saved, saved_decoding, saved_plain

    def _spare(self, text: str, findings: list[Finding]) -> tuple[list[Finding], list[tuple[str, str]]]:
        """The findings context does not spare, and a report note per spared one (`spared`, the signal)."""
        context = self.red.context
        if not findings or context is None:
            return findings, []
        kept, spared = context.spare(text, findings)
        return kept, [("spared", reason) for reason in spared]

    def _replace(
        self, text: str, findings: list[Finding], spared: Sequence[tuple[str, str]] = ()
    ) -> tuple[Any, tuple[tuple[str, str], ...], bool]:
        """(result, report notes, whether a pseudonymizer was consulted)."""
        if not findings:
            return text, tuple(spared), False
        parts: list[str] = []
        notes: list[tuple[str, str]] = list(spared)
        stateful = False
        last = 0
        for finding in with_wrapped_tails(text, findings):
            strategy = self.red.strategy_for(finding)
            if strategy.keep:
                continue
            stateful = stateful or strategy.kind == "pseudonymize"
            replacement = strategy.apply(finding.value, finding.entity, self.env, finding.detector.name)
            notes.append((strategy.report_section(), finding.entity))
            if finding.detector.name in CHECKED:  # the format's own check, in the report: `verified`/`refuted`
                name = finding.detector.name
                if (
                    BUILTIN_BY_NAME.get(name) is finding.detector
                    and (said := verdict(name, finding.value)) != "unchecked"
                ):
                    notes.append((said, name))
            if replacement is DROP:
                return DROP, tuple(notes), stateful
            parts.append(text[last : finding.start])
            parts.append(replacement)
            last = finding.end
        if not parts:
            return text, tuple(notes), False
        parts.append(text[last:])
        return "".join(parts), tuple(notes), stateful

    # --- key rules ------------------------------------------------------------------------------------

    def without_fallback(self, item: Any) -> Any:
        """A cursor or a content hash: opaque by design, so only a real detector's finding inside it counts."""
        saved = self.scanner
        self.scanner = saved.without_fallback()
        self.plain += 1
        try:
            return self.value(item)
        finally:
            self.scanner = saved
            self.plain -= 1

    def weak(self, rule: KeyRule, item: Any) -> Any:
        """A weak key (`auth`, `signature`, `cookies`): mappings below it are walked with their own keys' rules;
        a string is replaced only when it looks like a secret."""
        if isinstance(item, str):
            return self.ruled_string(rule, item) if looks_like_secret_value(item) else self.string(item)
        if isinstance(item, list | tuple):
            out = [new for element in item if (new := self.weak(rule, element)) is not DROP]
            return item if len(out) == len(item) and all(a is b for a, b in zip(out, item, strict=True)) else out
        return self.value(item)

    def jwk_member(self, detector: Detector, value: str) -> Any:
        """A private member of a JSON Web Key (`d`, `p`, …) in parsed JSON: what the `jwk_private_key` detector
        finds in the text, for a redactor without the key rule (the input guard reads values only)."""
        strategy = self.red.strategy_for(Finding(0, len(value), value, detector.entity, detector))
        if strategy.keep:
            return self.string(value)
        return self._apply(strategy, value, detector.entity, detector.name, mention=False)

    def described(self, item: Any) -> str | None:
        """Why a mapping under a sensitive key describes a value instead of holding one (a schema, an OpenAPI
        security scheme, a public JSON Web Key), when context is on; None otherwise."""
        if self.red.context is None or not isinstance(item, dict):
            return None
        return describes(item)

    def descriptive(self, reason: str, item: dict[Any, Any]) -> Any:
        """A mapping that describes a value: its own keys name no secret; what is below is read as usual."""
        self.counts[("spared", reason)] = self.counts.get(("spared", reason), 0) + 1
        if reason == "schema":
            return self.mapping(item, keyed=False)  # its `properties` name fields, which are schemas in turn
        saved = self.scanner
        self.unkeyed += 1
        if reason == "public_jwk":
            self.scanner = saved.without_fallback()
            self.plain += 1
        try:
            return self.mapping(item, keyed=False)
        finally:
            self.scanner = saved
            self.unkeyed -= 1
            if reason == "public_jwk":
                self.plain -= 1

    def ruled(self, rule: KeyRule, item: Any, key: str | None = None) -> Any:
        if rule.category in ("secret", "credential") and (reason := self.described(item)) is not None:
            return self.descriptive(reason, item)
        if rule.weak is not None and key is not None and rule.weak(key):
            return self.weak(rule, item)
        if rule.subtree:
            return self.subtree(rule, item)
        if rule.map_keys:
            return self.map_keys(rule, item) if isinstance(item, dict) else self.value(item)
        if rule.parser == "rag" and isinstance(item, str):
            return self.rag_content(item)
        if isinstance(item, str):
            return self.ruled_string(rule, item)
        if isinstance(item, int | float) and not isinstance(item, bool) and rule.scalars:
            return self.ruled_string(rule, str(item), number=item)
        if isinstance(item, list | tuple):
            out = []
            for element in item:
                new = (
                    self.ruled(rule, element) if isinstance(element, str | int | float | list) else self.value(element)
                )
                if new is not DROP:
                    out.append(new)
            return out
        return self.value(item)

    def ruled_string(self, rule: KeyRule, text: str, number: Any = None) -> Any:
        if not text:
            return text
        if rule.split_arrow and " -> " in text:
            sides = [self.ruled_string(rule, side) for side in text.split(" -> ")]
            if any(side is DROP for side in sides):
                return DROP
            return " -> ".join(sides)
        if rule.defer:
            whole = self.scanner.whole(text)
            if whole is not None:
                strategy = self.red.strategy_for(whole)
                if strategy.keep:
                    return number if number is not None else text
                return self._apply(strategy, text, whole.entity, whole.detector.name, mention=True)
        entity = rule.entity_for(text)
        strategy = self.red.table.resolve(self.red._rule_keys(rule, entity))
        if strategy.keep:
            return self.string(text) if number is None else number
        return self._apply(strategy, text, entity, rule.name, mention=entity not in _NO_MENTION)

    def _apply(self, strategy: Strategy, text: str, entity: str, source: str, mention: bool) -> Any:
        replacement = strategy.apply(text, entity, self.env, source)
        self.note(strategy, entity)
        if replacement is DROP:
            return DROP
        if mention and len(text) >= 3 and replacement != text and len(self.mentions) < _MENTION_LIMIT:
            self.mentions.setdefault(text, (replacement, strategy.report_section()))
        return replacement

    def subtree(self, rule: KeyRule, item: Any) -> Any:
        """Everything below a sensitive key is replaced; None, booleans and empty strings carry nothing."""
        if isinstance(item, dict):
            out: dict[Any, Any] = {}
            for key, value in item.items():
                new_key: Any = key
                if isinstance(key, str) and self.red.scan_keys:
                    new_key = self.string(key, structured=False)
                    if new_key is DROP:
                        continue
                    if new_key != key:
                        new_key = _unique_key(new_key, out)
                new = self.subtree(rule, value)
                if new is not DROP:
                    out[new_key] = new
            return out
        if isinstance(item, list | tuple):
            out_list = [new for value in item if (new := self.subtree(rule, value)) is not DROP]
            if len(out_list) == len(item) and all(a is b for a, b in zip(out_list, item, strict=True)):
                return item  # nothing below changed (an empty list, nulls): the caller's own object
            return out_list
        if item is None or isinstance(item, bool) or item == "":
            return item
        if isinstance(item, str) and is_template(item):
            # `${DB_PASSWORD}`, `<token>`, `****`: a slot, not a secret; still read as text
            # (`<password>s3cr3t</password>` starts like a slot and holds one)
            return self.string(item)
        text = item if isinstance(item, str) else str(item)
        strategy = self.red.table.resolve(self.red._rule_keys(rule, rule.entity))
        if strategy.keep:
            return self.value(item)
        return self._apply(strategy, text, rule.entity, rule.name, mention=False)

    def map_keys(self, rule: KeyRule, data: dict[Any, Any]) -> Any:
        out: dict[Any, Any] = {}
        for key, value in data.items():
            new_key: Any = key
            if isinstance(key, str) and key:
                new_key = self.ruled_string(rule, key)
                if new_key is DROP:
                    continue
                if new_key != key:
                    new_key = _unique_key(new_key, out)
            new = self.value(value)
            if new is not DROP:
                out[new_key] = new
        return out

    def tag_container(self, item: Any) -> Any:
        if isinstance(item, dict):
            out: dict[Any, Any] = {}
            changed = False
            for key, value in item.items():
                new_key: Any = key
                if isinstance(key, str) and self.red.scan_keys:
                    new_key = self.string(key, structured=False)
                    if new_key is DROP:
                        changed = True
                        continue
                    if new_key != key:
                        new_key = _unique_key(new_key, out)
                new = self.tag_value(key if isinstance(key, str) else "", value)
                if new is DROP:
                    changed = True
                    continue
                changed = changed or new is not value or new_key is not key
                out[new_key] = new
            return out if changed else item
        if isinstance(item, list) and all(isinstance(e, dict) for e in item):
            out_list = []
            for element in item:
                fields = {normalize_key(k): k for k in element if isinstance(k, str)}
                if "key" in fields and "value" in fields and isinstance(element[fields["key"]], str):
                    tag_key = element[fields["key"]]
                    new_key = self.string(tag_key, structured=False) if self.red.scan_keys else tag_key
                    new_value = self.tag_value(tag_key, element[fields["value"]])
                    if new_key is DROP or new_value is DROP:
                        continue
                    copy = {k: v for k, v in element.items()}
                    copy[fields["key"]] = new_key
                    copy[fields["value"]] = new_value
                    out_list.append(copy)
                else:
                    new = self.value(element)
                    if new is not DROP:
                        out_list.append(new)
            return out_list
        return self.value(item)

    def tag_value(self, tag_key: str, value: Any) -> Any:
        norm = normalize_key(tag_key)
        if norm in self.red.tag_allowlist or not isinstance(value, str) or not value:
            return self.value(value)
        entity, category = ("person", "pii") if norm in PERSON_TAG_KEYS else ("tag_value", "free_text")
        strategy = self.red.table.resolve((entity, category))
        if strategy.keep:
            return self.value(value)
        return self._apply(strategy, value, entity, "tags", mention=False)

    def rag_content(self, text: str) -> Any:
        """RAG chunks: `Resource:` and `Account:` lines are references, `Tags:` lines are tag JSON."""
        lines = []
        for line in text.split("\n"):
            match = _RAG_LINE.match(line)
            if match is None:
                new = self.string(line, structured=False)
            else:
                lead, label, sep, rest = match.groups()
                if label == "Tags":
                    parsed = _json_text(rest)
                    tagged = self.tag_container(parsed) if parsed is not None else self.string(rest, structured=False)
                    new_rest = (
                        tagged
                        if isinstance(tagged, str) or tagged is DROP
                        else orjson.dumps(tagged, option=orjson.OPT_NON_STR_KEYS).decode()
                    )
                else:
                    rule = BUILTIN_KEY_RULES_BY_NAME["resource_ref_key" if label == "Resource" else "account_id_key"]
                    new_rest = self.ruled_string(rule, rest.strip()) if rest.strip() else rest
                new = DROP if new_rest is DROP else f"{lead}{label}{sep}{new_rest}"
            if new is not DROP:
                lines.append(new)
        return "\n".join(lines)

    # --- mentions -------------------------------------------------------------------------------------

    def replace_mentions(self, values: list[Any]) -> list[Any]:
        """Values a key rule replaced are replaced wherever else they appear, as whole values or words."""
        pattern = literal_alternation(sorted(self.mentions, key=len, reverse=True))
        finder = re.compile(r"(?<![\w-])(?:" + pattern + r")(?![\w-])")
        return [self._mention_value(v, finder) for v in values]

    def _mention_value(self, value: Any, finder: re.Pattern[str]) -> Any:
        if isinstance(value, str):
            return self._mention_text(value, finder)
        if isinstance(value, list):
            return [self._mention_value(v, finder) for v in value]
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                norm = normalize_key(key) if isinstance(key, str) else ""
                if key in self.red.skip_keys or norm in TAG_CONTAINERS or norm in ENUM_KEYS:
                    out[key] = item
                else:
                    out[key] = self._mention_value(item, finder)
            return out
        return value

    def _mention_text(self, text: str, finder: re.Pattern[str]) -> str:
        exact = self.mentions.get(text)
        if exact is not None:
            self.counts[(exact[1], "identifier_mention")] = self.counts.get((exact[1], "identifier_mention"), 0) + 1
            return exact[0]
        if not _FREE_TEXT_MARK.search(text):
            return text

        def swap(match: re.Match[str]) -> str:
            replacement, section = self.mentions[match.group(0)]
            self.counts[(section, "identifier_mention")] = self.counts.get((section, "identifier_mention"), 0) + 1
            return replacement

        return finder.sub(swap, text)


def _unique_key(key: str, taken: Mapping[Any, Any]) -> str:
    """Two keys replaced by the same text must not overwrite each other."""
    if key not in taken:
        return key
    index = 2
    while f"{key}#{index}" in taken:
        index += 1
    return f"{key}#{index}"


def _payload_text(values: Sequence[Any]) -> str:
    """The JSON text `_narrow` reads: the parts as one array, less a text part that is the JSON of a structured part
    (a tool's `structuredContent` repeated in a text block, as the protocol advises). The walk reads such a text as
    the data it parses to, the same strings under the same keys, so what the narrowing finds in the one holds for
    the other; its layout (indentation, escapes) is never scanned."""
    if len(values) < 2 or not any(
        value.__class__ is str and value[:1] in ("{", "[") for value in values
    ):  # (the usual small result: nothing can repeat, one dump)
        return orjson.dumps(list(values), option=orjson.OPT_NON_STR_KEYS).decode()
    dumped = [orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS) for value in values]
    structured = {part for value, part in zip(values, dumped, strict=True) if value.__class__ is not str}
    if structured:
        kept = []
        for value, part in zip(values, dumped, strict=True):
            repeats = (
                value.__class__ is str
                and len(value) > 1
                and value[0] in "{["
                and (parsed := _json_text(value))
                and orjson.dumps(parsed, option=orjson.OPT_NON_STR_KEYS) in structured
            )
            if not repeats:
                kept.append(part)
        dumped = kept
    return (b"[" + b",".join(dumped) + b"]").decode()


def _json_text(text: str) -> Any:
    """The parsed value when a string holds a JSON object or array, else None."""
    head = text.lstrip()[:1]
    if head not in ("{", "[") or text.rstrip()[-1:] not in ("}", "]"):
        return None
    try:
        parsed = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict | list) else None


__all__ = ["DEFAULT_SKIP_KEYS", "KEEP", "REDACT_OPTIONS", "Redactor"]


def _takes_the_seam(start: int, end: int, cut: int, own: Sequence[tuple[int, int]], fixed_shape: bool) -> bool:
    """Whether a seam finding [start, end) is a value split at `cut`: it overlaps no block's own reading, or, for
    a fixed-shape format, exactly one that it carries on across the seam (same start and a reading cut off by the
    block's end, or the mirror on the other side)."""
    overlapped = [(a, b) for a, b in own if not (end <= a or start >= b)]
    if not overlapped:
        return True
    if len(overlapped) > 1 or not fixed_shape:
        return False
    a, b = overlapped[0]
    return (start == a and b == cut < end) or (end == b and a == cut > start)
