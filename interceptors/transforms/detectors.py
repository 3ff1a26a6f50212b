"""Content detectors and the scanner that finds them: hint prefilters, validators, leftmost non-overlapping."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .entities import CATEGORIES, classify_ip_text, fold_for_hints, is_placeholder, looks_high_entropy, shannon_entropy
from .normalize import needs_normalizing, normalize_for_matching
from .triepattern import LiteralFinder

Validator = Callable[[str, str], "str | None"]
"""`(matched text, detector entity) -> entity to report (possibly refined), or None to reject the match`."""


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of sensitive content. Detectors earlier in a scanner's list win ties at the same start."""

    name: str
    entity: str
    category: str
    pattern: re.Pattern[str]
    confidence: float
    hints: tuple[str, ...] = ()
    """Lower-case substrings; the regex only runs on text containing one (none: it always runs)."""
    min_length: int = 0
    group: int | tuple[int, ...] = 0
    """The reported span: a group number, or several alternatives (the first that took part wins)."""
    validator: Validator | None = None
    refines: tuple[str, ...] = ()
    """Entities the validator may report instead of `entity` (pruning needs to know them)."""
    gate: re.Pattern[str] | None = None
    """For hintless detectors: a cheap superset test run once on a whole payload's JSON text."""
    description: str = ""
    enabled: bool = True
    fallback: bool = False
    """A catch-all heuristic: it only claims text that no other detector's finding overlaps."""
    spec: str = ""
    """The vendor's documented format in the `tokenspec` language, written apart from `pattern`: what the
    testing kit and the quality bench draw samples from (empty: the kit falls back to the pattern)."""
    examples: tuple[str, ...] = ()
    """Texts the detector must report (a format given by examples instead of, or next to, a spec)."""
    source: str = ""
    """Where the format is documented (doc/TRANSFORMS.md lists it)."""
    reach: int | None = None
    """For a hinted detector whose every match starts at most `reach` characters before an occurrence of one of
    its hints (in the text folded for hints): the scanner tries only those starts instead of every position
    (same matches; the regex's own search has no literal to skip to). None: the whole text is searched."""

    @property
    def entities(self) -> tuple[str, ...]:
        return (self.entity, *self.refines)


@dataclass(frozen=True, slots=True)
class Finding:
    """A validated match: `text[start:end]` is `value`, reported as `entity`."""

    start: int
    end: int
    value: str
    entity: str
    detector: Detector


# --- validators -------------------------------------------------------------------------------------


def validate_ip(value: str, entity: str) -> str | None:
    """Only real addresses, reported by class (`private_ip`, `public_cidr`, …)."""
    if value == "::":
        return None
    return classify_ip_text(value)


def validate_secret(value: str, entity: str) -> str | None:
    """A secret slot holding a template or a marker is not a secret."""
    return None if is_placeholder(value) else entity


def validate_entropy(bits: float) -> Validator:
    def check(value: str, entity: str) -> str | None:
        return entity if shannon_entropy(value) >= bits and not is_placeholder(value) else None

    return check


def validate_high_entropy(bits: float) -> Validator:
    def check(value: str, entity: str) -> str | None:
        return entity if looks_high_entropy(value, bits) else None

    return check


def validator_by_name(spec: str) -> Validator:
    """`ip`, `secret`, `not_placeholder`, `entropy[:bits]`, `high_entropy[:bits]`; ValueError otherwise."""
    name, _, arg = spec.partition(":")
    name = name.strip().lower().replace("-", "_")
    if name == "ip" and not arg:
        return validate_ip
    if name in ("secret", "not_placeholder") and not arg:
        return validate_secret
    if name in ("entropy", "high_entropy"):
        bits = 3.0 if name == "entropy" else 4.0
        if arg:
            try:
                bits = float(arg)
            except ValueError:
                raise ValueError("the entropy bound must be a number") from None
            if not 0 < bits <= 8:
                raise ValueError("the entropy bound must be in (0, 8]")
        return validate_entropy(bits) if name == "entropy" else validate_high_entropy(bits)
    raise ValueError("must be ip, secret, not_placeholder, entropy[:bits] or high_entropy[:bits]")


# --- the scanner ------------------------------------------------------------------------------------


def _span(match: re.Match[str], group: int | tuple[int, ...]) -> tuple[int, int]:
    if isinstance(group, int):
        return match.span(group)
    for number in group:
        start, end = match.span(number)
        if start >= 0:
            return start, end
    return -1, -1


def matches_near_hints(
    pattern: re.Pattern[str], text: str, folded: str, hints: Sequence[str], reach: int
) -> Iterable[re.Match[str]]:
    """What `pattern.finditer(text)` yields, for a pattern whose every match starts at most `reach` characters
    before an occurrence of a hint in `folded` (`text` folded for hints, index for index)."""
    if len(folded) != len(text):
        return pattern.finditer(text)
    anchors = hint_anchors(folded, hints, len(text) // (2 * (reach + 1)))
    if anchors is None:
        return pattern.finditer(text)  # hints everywhere: one search costs less than a try per start
    found = matches_at_anchors(pattern, text, anchors, reach)
    return pattern.finditer(text) if found is None else found


def hint_anchors(folded: str, hints: Sequence[str], limit: int | None = None) -> list[int] | None:
    """Every position where a hint starts in `folded`, overlapping ones included, in order; None when there are
    more than `limit`."""
    anchors: list[int] = []
    for hint in hints:
        at = folded.find(hint)
        while at >= 0:
            anchors.append(at)
            if limit is not None and len(anchors) > limit:
                return None
            at = folded.find(hint, at + 1)
    anchors.sort()
    return anchors


def matches_at_anchors(
    pattern: re.Pattern[str], text: str, anchors: Sequence[int], reach: int
) -> list[re.Match[str]] | None:
    """The leftmost non-overlapping matches starting in `[anchor - reach, anchor]` for some anchor (sorted), each
    tried with `match` (which, like a search, sees the text before it for look-behinds); None: an empty match,
    which `finditer` steps past by its own rule."""
    match = pattern.match
    found: list[re.Match[str]] = []
    start = 0  # the first start not tried yet and not inside an earlier match
    for anchor in anchors:
        start = max(start, anchor - reach)
        while start <= anchor:
            hit = match(text, start)
            if hit is None:
                start += 1
            elif hit.end() == start:
                return None
            else:
                found.append(hit)
                start = hit.end()
    return found


_RUN_GATE = re.compile(r"\(\?<!\[([^\]\\^\[]+)\]\)\[\1\]\{([1-9][0-9]{0,3})\}")
"""A gate that asks for a run of N or more characters of one class: `(?<![X])[X]{N}`."""


class _RunMarks(dict[int, str]):
    """`str.translate` table: a character of the class to `a`, any other to a space (filled on first use)."""

    __slots__ = ("_member",)

    def __init__(self, member: Callable[[str], object]) -> None:
        super().__init__()
        self._member = member

    def __missing__(self, code: int) -> str:
        mark = self[code] = "a" if self._member(chr(code)) else " "
        return mark


@lru_cache(maxsize=256)
def gate_test(gate: re.Pattern[str]) -> Callable[[str], object]:
    """How a gate is asked of a payload's JSON text: its search, or, for a run gate (`(?<![X])[X]{N}`, a run of N
    or more characters of class X), the same answer from the text translated to marks and one substring search
    (C speed; the search tries the class at every position of a text that holds no such run). Truthy: it holds."""
    shape = _RUN_GATE.fullmatch(gate.pattern)
    if shape is None or gate.flags != re.UNICODE:
        return gate.search
    table = _RunMarks(re.compile(f"[{shape.group(1)}]").fullmatch)
    run = "a" * int(shape.group(2))
    return lambda text: run in text.translate(table)


@dataclass(slots=True)
class Scanner:
    """Runs detectors over text; candidates are sorted by start and earlier detectors win at equal starts."""

    detectors: tuple[Detector, ...]
    min_length: int = 0
    _subsets: dict[int, Scanner] = field(default_factory=dict, repr=False)
    _hints: tuple[str, ...] = field(default=(), repr=False)
    _hint_finder: LiteralFinder | None = field(default=None, repr=False)
    _hint_masks: dict[str, int] = field(default_factory=dict, repr=False)
    _always_mask: int = field(default=0, repr=False)
    _gated: tuple[tuple[int, Callable[[str], object]], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self.min_length = min((max(d.min_length, 1) for d in self.detectors), default=0)
        self._hints = tuple(sorted({h for d in self.detectors for h in d.hints}))
        # `narrow` in bit masks: which detectors each hint wakes, which always run, which a gate decides.
        gated = []
        for index, detector in enumerate(self.detectors):
            if detector.hints:
                for hint in detector.hints:
                    self._hint_masks[hint] = self._hint_masks.get(hint, 0) | 1 << index
            elif detector.gate is None:
                self._always_mask |= 1 << index
            else:
                gated.append((index, gate_test(detector.gate)))
        self._gated = tuple(gated)

    def __bool__(self) -> bool:
        return bool(self.detectors)

    def narrow(self, folded_payload: str, raw_payload: str) -> Scanner:
        """The detectors that could match anywhere in a payload (its JSON text, folded for hints)."""
        if len(self._hints) > 16:
            finder = self._hint_finder
            if finder is None:  # built on first use: a narrowed subset is never narrowed again
                finder = self._hint_finder = LiteralFinder(self._hints)
            present = finder.present(folded_payload)  # every hint present, in a few fast passes
        else:
            present = {hint for hint in self._hints if hint in folded_payload}
        mask = self._always_mask
        hint_masks = self._hint_masks
        for hint in present:
            mask |= hint_masks[hint]
        for index, gate in self._gated:
            if gate(raw_payload):
                mask |= 1 << index
        if mask == (1 << len(self.detectors)) - 1:
            return self
        subset = self._subsets.get(mask)
        if subset is None:
            if len(self._subsets) > 4096:
                self._subsets.clear()
            chosen = tuple(d for i, d in enumerate(self.detectors) if mask >> i & 1)
            subset = self._subsets[mask] = Scanner(chosen)
        return subset

    def without_fallback(self) -> Scanner:
        """The same scanner with its catch-all heuristics left out (for values opaque by design)."""
        key = -1 - len(self.detectors)
        subset = self._subsets.get(key)
        if subset is None:  # asked once per value under an id or digest key: remembered, itself when nothing changes
            plain = tuple(d for d in self.detectors if not d.fallback)
            subset = self._subsets[key] = self if len(plain) == len(self.detectors) else Scanner(plain)
        return subset

    def scan(self, text: str) -> list[Finding]:
        """Findings in `text`, matched on its normalised form (see `normalize`) and mapped back to the original:
        each finding's span covers every original character its match came from."""
        if not needs_normalizing(text):
            return self._scan(text)
        normal, starts, ends = normalize_for_matching(text)
        if normal == text:
            return self._scan(text)
        out = []
        for finding in self._scan(normal):
            start, end = starts[finding.start], ends[finding.end - 1]
            out.append(Finding(start, end, text[start:end], finding.entity, finding.detector))
        return out

    def _scan(self, text: str) -> list[Finding]:
        size = len(text)
        if size < self.min_length or not self.detectors:
            return []
        folded: str | None = None
        candidates: list[tuple[int, int, int, str, Detector]] = []
        for priority, detector in enumerate(self.detectors):
            if size < detector.min_length:
                continue
            if detector.hints:
                if folded is None:
                    folded = fold_for_hints(text)
                for hint in detector.hints:  # (a loop, not `any` over a generator: this runs per string and detector)
                    if hint in folded:
                        break
                else:
                    continue
            validator = detector.validator
            matches: Iterable[re.Match[str]]
            if detector.reach is not None and folded is not None:
                matches = matches_near_hints(detector.pattern, text, folded, detector.hints, detector.reach)
            else:
                matches = detector.pattern.finditer(text)
            for match in matches:
                start, end = _span(match, detector.group)
                if start < 0 or start == end:
                    continue
                entity = detector.entity
                if validator is not None:
                    checked = validator(text[start:end], detector.entity)
                    if checked is None:
                        continue
                    entity = checked
                candidates.append((start, priority, end, entity, detector))
        if not candidates:
            return []
        candidates.sort(key=lambda c: (c[0], c[1]))
        chosen: list[tuple[int, int, int, str, Detector]] = []
        last_end = 0
        for candidate in candidates:
            if candidate[4].fallback:
                continue
            if candidate[0] >= last_end:
                chosen.append(candidate)
                last_end = candidate[2]
            elif candidate[2] > last_end and candidate[4].category == chosen[-1][4].category == "secret":
                # Two readings of one value overlap (a connection string's `Password="a\"b"` stops at the
                # quote, the labelled-secret reading escapes it): cover both, never the shorter one alone. Secrets
                # only: for identifiers the first reading is the entity (a URL's user, not user@host).
                start, priority, _, entity, detector = chosen[-1]
                chosen[-1] = (start, priority, candidate[2], entity, detector)
                last_end = candidate[2]
        fallbacks = [c for c in candidates if c[4].fallback]
        if fallbacks:
            taken = [(c[0], c[2]) for c in chosen]
            last_end = 0
            for candidate in fallbacks:
                start, end = candidate[0], candidate[2]
                if start >= last_end and all(end <= a or start >= b for a, b in taken):
                    chosen.append(candidate)
                    last_end = end
            chosen.sort(key=lambda c: c[0])
        return [Finding(start, end, text[start:end], entity, det) for start, _, end, entity, det in chosen]

    def whole(self, text: str) -> Finding | None:
        """The single finding that covers all of `text`, if there is exactly one."""
        findings = self.scan(text)
        if len(findings) == 1 and findings[0].start == 0 and findings[0].end == len(text):
            return findings[0]
        return None


# --- custom detectors from configuration ---------------------------------------------------------------

_FLAG_NAMES = {
    "i": re.IGNORECASE,
    "ignorecase": re.IGNORECASE,
    "ignore_case": re.IGNORECASE,
    "m": re.MULTILINE,
    "multiline": re.MULTILINE,
    "s": re.DOTALL,
    "dotall": re.DOTALL,
    "x": re.VERBOSE,
    "verbose": re.VERBOSE,
}
_DETECTOR_FIELDS = frozenset(
    {"name", "pattern", "entity", "category", "group", "confidence", "hints", "flags", "ignore_case", "validator",
     "min_length", "enabled", "description", "spec", "examples", "source"}
)  # fmt: skip
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,63}")


def _flags(value: Any, path: str) -> re.RegexFlag:
    items: Iterable[Any]
    if isinstance(value, str):
        items = [value] if value.lower().replace("-", "_") in _FLAG_NAMES else list(value)
    elif isinstance(value, list):
        items = value
    else:
        raise ValueError(f"{path}: must be a string of letters from 'imsx' or a list of flag names")
    flags = re.RegexFlag(0)
    for item in items:
        key = str(item).strip().lower().replace("-", "_") if isinstance(item, str) else None
        if key is None or key not in _FLAG_NAMES:
            raise ValueError(f"{path}: unknown regex flag")
        flags |= _FLAG_NAMES[key]
    return flags


def compile_pattern(pattern: Any, flags: int, path: str) -> re.Pattern[str]:
    """Compile a configured regex; the error names the field and the regex problem, never the pattern."""
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"{path}: must be a non-empty regular expression")
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"{path}: not a valid regular expression ({exc.msg} at position {exc.pos})") from None


def detector_from_config(config: Any, path: str) -> Detector:
    """A custom detector from a policy's `detectors:` item; ValueError names the field, never its value."""
    if not isinstance(config, Mapping):
        raise ValueError(f"{path}: must be a mapping")
    unknown = [k for k in config if k not in _DETECTOR_FIELDS]
    if unknown:
        names = ", ".join(repr(k) if isinstance(k, str) and _NAME.fullmatch(k) else "<unprintable>" for k in unknown)
        raise ValueError(f"{path}: unknown field(s) {names}")
    name = config.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{path}.name: required, letters, digits and _.:- (at most 64)")
    flags = re.RegexFlag(0)
    if "flags" in config:
        flags = _flags(config["flags"], f"{path}.flags")
    if "ignore_case" in config:
        if not isinstance(config["ignore_case"], bool):
            raise ValueError(f"{path}.ignore_case: must be a boolean")
        if config["ignore_case"]:
            flags |= re.IGNORECASE
    pattern = compile_pattern(config.get("pattern"), flags, f"{path}.pattern")
    if pattern.groupindex:
        raise ValueError(f"{path}.pattern: use numbered groups only")
    entity = config.get("entity", name)
    if not isinstance(entity, str) or not _NAME.fullmatch(entity):
        raise ValueError(f"{path}.entity: must be a name (letters, digits and _.:-)")
    category = config.get("category", "identifier")
    if category not in CATEGORIES:
        raise ValueError(f"{path}.category: must be one of {', '.join(CATEGORIES)}")
    group = config.get("group", 0)
    if not isinstance(group, int) or isinstance(group, bool) or not 0 <= group <= pattern.groups:
        raise ValueError(f"{path}.group: must be a group number of the pattern")
    confidence = config.get("confidence", 0.8)
    if not isinstance(confidence, int | float) or isinstance(confidence, bool) or not 0 <= confidence <= 1:
        raise ValueError(f"{path}.confidence: must be a number between 0 and 1")
    hints = config.get("hints", [])
    if isinstance(hints, str):
        hints = [hints]
    if not isinstance(hints, list) or not all(isinstance(h, str) and h for h in hints):
        raise ValueError(f"{path}.hints: must be a list of non-empty strings")
    validator = None
    if config.get("validator") is not None:
        if not isinstance(config["validator"], str):
            raise ValueError(f"{path}.validator: must be a string")
        try:
            validator = validator_by_name(config["validator"])
        except ValueError as exc:
            raise ValueError(f"{path}.validator: {exc}") from None
    refines: tuple[str, ...] = ()
    if validator is validate_ip:
        refines = tuple(f"{c}_{k}" for c in ("private", "public", "special") for k in ("ip", "cidr"))
    min_length = config.get("min_length", 0)
    if not isinstance(min_length, int) or isinstance(min_length, bool) or min_length < 0:
        raise ValueError(f"{path}.min_length: must be a non-negative integer")
    enabled = config.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"{path}.enabled: must be a boolean")
    description = config.get("description", "")
    if not isinstance(description, str):
        raise ValueError(f"{path}.description: must be a string")
    spec = config.get("spec", "")
    if not isinstance(spec, str):
        raise ValueError(f"{path}.spec: must be a string in the format-spec language (doc/TESTING.md)")
    if spec:
        from .tokenspec import SpecError, parse_spec

        try:
            parse_spec(spec)
        except SpecError as exc:
            raise ValueError(f"{path}.spec: {exc}") from None
    examples = config.get("examples", [])
    if isinstance(examples, str):
        examples = [examples]
    if not isinstance(examples, list) or not all(isinstance(e, str) and e for e in examples):
        raise ValueError(f"{path}.examples: must be a list of non-empty strings")
    source = config.get("source", "")
    if not isinstance(source, str):
        raise ValueError(f"{path}.source: must be a string")
    return Detector(
        name=name,
        entity=entity,
        category=category,
        pattern=pattern,
        confidence=float(confidence),
        hints=tuple(fold_for_hints(h) for h in hints),
        min_length=min_length,
        group=group,
        validator=validator,
        refines=refines,
        description=description,
        enabled=enabled,
        spec=spec,
        examples=tuple(examples),
        source=source,
    )


def merge_detectors(builtin: Sequence[Detector], custom: Sequence[Detector], disabled: Iterable[str]) -> list[Detector]:
    """Custom detectors replace built-ins of the same name in place; new ones go first. Disabled ones leave."""
    off = set(disabled)
    by_name = {d.name: d for d in custom}
    merged = [by_name.pop(d.name, d) for d in builtin]
    ordered = [d for d in custom if d.name in by_name] + merged
    return [d for d in ordered if d.enabled and d.name not in off]
