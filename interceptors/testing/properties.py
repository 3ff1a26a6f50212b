"""The standard properties of a policy's redaction rules, runnable from any test (or without pytest).

```python
from interceptors.testing import check_redaction_rules

def test_my_policy_keeps_its_promises():
    check_redaction_rules("policies/prod.yaml")   # a profile name, a file, a dict, or a Policy
```

- `no_leak`: every format the policy replaces, in every supported syntax and MCP payload, never comes
  out (in any spelling), and the input payload is left untouched;
- `whole_values`: the policy's scanner covers each such value entirely (an off-by-one leaves a character);
- `own_format`: each detector with an independent format spec (`spec:`/`examples:`, every built-in secret
  family has one) finds every sample of that spec whole *on its own*, so a detector broken on purpose fails
  even where another detector (the entropy fallback) would still cover for it;
- `boundaries`: each of the policy's own detectors finds, alone and whole, the tokens at the edges of its
  documented format (its pattern's token shape under its `examples:` and `hints:`: exact lengths, alphabet
  edges, the last character, every prefix variant), so an off-by-one fails without a `spec:`;
- `decoys_survive`: placeholders and near-misses of every built-in format come out unchanged;
- `sensitive_keys`: whatever sits under a sensitive key (`password`, `ApiKey`, `x-auth-token`, …) never
  comes out;
- `refuses_secret_arguments`: with `guard_secrets` in reject mode, a `tools/call` carrying a secret is
  refused, and the refusal names no value.

No silent greens: a policy that redacts nothing fails (`redacts_something`) unless the suite is told
`expect_no_redaction=True`, and a property the policy cannot satisfy by design is named up front.

A detector whose name is a built-in one is held to the built-in format (`BUILTIN_FORMATS`), so a policy
that overrides a built-in cannot quietly find less; a new custom detector gets a format generated from
its own pattern.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from ..enums import Phase
from ..errors import InterceptorsError
from ..registry import Invocation
from ..transforms import (
    META_KEY,
    KeyedHasher,
    Pipeline,
    Pseudonymizer,
    Redactor,
    SecretGuard,
    TransformContext,
    TransformStages,
    assemble_input,
    assemble_output,
    check_transform_sections,
    transform_payload,
)
from ..transforms.catalog import BUILTIN_BY_NAME
from ..transforms.detectors import Detector, Finding, Scanner, detector_from_config
from ..transforms.entities import normalize_key
from ._mask import mask
from .assertions import assert_no_leak, assert_not_redacted, find_leaks
from .boundaries import BoundaryDraw, TokenShape, boundary_samples, documented_shape
from .contexts import (
    CONTEXTS,
    CONTEXTS_BY_NAME,
    ENCODED_CONTEXTS,
    FILLER_WORDS,
    NEUTRAL_KEYS,
    Context,
    embedded,
    render,
)
from .formats import (
    BUILTIN_FORMATS,
    NEAR_MISS_FAMILIES,
    Secret,
    SecretFormat,
    format_for,
    keyed_secrets,
    near_misses,
    placeholders,
)
from .payloads import TRANSFORMED_KINDS, McpCase, as_text, mcp_payloads, tool_call_requests
from .profiles import register_profiles
from .regexgen import one_of_evenly

TEST_KEY = b"interceptors.testing"
MIN_SECRET_LENGTH = 6
"""Planted values shorter than this are not drawn: four random characters can turn up in a report by chance."""


class PropertyFailures(InterceptorsError, AssertionError):
    """One or more standard properties failed; the message lists each, with its (masked) reason."""

    def __init__(self, failures: Mapping[str, BaseException]) -> None:
        self.failures = dict(failures)
        lines = [f"{len(self.failures)} redaction propert{'y' if len(self.failures) == 1 else 'ies'} failed:"]
        for name, exc in self.failures.items():
            text = str(exc).strip() or type(exc).__name__
            lines.append(f"- {name}: {type(exc).__name__}: {text}")
        super().__init__("\n".join(lines))


# --- the thing under test ------------------------------------------------------------------------------------


_LAST_TARGET: dict[int, RedactionTarget] = {}


class RedactionTarget:
    """A policy's transform pipelines, ready to be fed payloads.

    Build it with `RedactionTarget.load(source)`: a profile name or a policy file (read by `load_policy`,
    so `extends` works), a policy document or bare transform sections (`STANDARD_TRANSFORMS`), a `Policy`, or
    an assembled output `Pipeline` (for configurations built in code).
    """

    def __init__(
        self,
        sections: Mapping[str, Any],
        *,
        name: str | None = None,
        pseudonymizer: Pseudonymizer | None = None,
        output: Pipeline | None = None,
    ) -> None:
        if output is None:
            check_transform_sections(sections, "policy")
        self.sections = sections
        raw_name = sections.get("name")
        self.name = name or (raw_name if isinstance(raw_name, str) else "custom")
        self.pseudonymizer: Pseudonymizer = pseudonymizer or KeyedHasher(TEST_KEY)
        self.output = output if output is not None else assemble_output(sections)
        self.input = assemble_input(sections) if output is None else Pipeline(())
        redactors = [t for t in self.output.transforms if isinstance(t, Redactor)]
        self.redactor: Redactor | None = redactors[-1] if redactors else None
        guards = [t for t in self.input.transforms if isinstance(t, SecretGuard) and t.action == "reject"]
        self.guard: SecretGuard | None = guards[0] if guards else None
        self._stages: TransformStages | None = None

    @classmethod
    def load(cls, source: Any, *, pseudonymizer: Pseudonymizer | None = None) -> RedactionTarget:
        if isinstance(source, RedactionTarget):
            return source
        if isinstance(source, Pipeline):
            return cls({}, name="pipeline", pseudonymizer=pseudonymizer, output=source)
        if isinstance(source, Mapping) and not _is_policy_document(source):
            return cls(source, pseudonymizer=pseudonymizer)
        from ..policy import Policy, load_policy

        policy = source if isinstance(source, Policy) else load_policy(source)
        return cls(policy.document, name=policy.name, pseudonymizer=pseudonymizer)

    def __repr__(self) -> str:
        return f"<RedactionTarget {self.name!r}: {' → '.join(self.output.types) or 'identity'}>"

    # running ----------------------------------------------------------------------------------------------

    def context(self, kind: str = "tool", direction: str = "output") -> TransformContext:
        return TransformContext(kind=kind, direction=direction, pseudonymizer=self.pseudonymizer)

    def transform(self, event: str, payload: Any) -> Any:
        """The output pipeline over a response payload, as the `transforms/output` interceptor runs it."""
        self._isolate()
        new, _ = transform_payload(event, payload, self.output, self.context())
        return new

    def apply(self, value: Any) -> Any:
        """The output pipeline over a bare value (no channel handling)."""
        self._isolate()
        return self.output.apply(value, self.context())

    def _isolate(self) -> None:
        """Built transforms are shared between identical specs, and a redactor's string cache is not keyed by
        the pseudonymizer (doc/TESTING.md, known finding 8): when another target used this redactor last,
        its cached replacements are dropped, so each target sees its own pseudonymizer's tokens."""
        for step in self.output.transforms:
            if isinstance(step, Redactor) and _LAST_TARGET.get(id(step)) is not self:
                cache = getattr(step, "_cache", None)
                if isinstance(cache, dict):
                    cache.clear()
                _LAST_TARGET[id(step)] = self

    @property
    def stages(self) -> TransformStages:
        if self._stages is None:
            self._stages = TransformStages(self.sections, pseudonymizer=self.pseudonymizer)
        return self._stages

    def request_verdict(self, payload: Mapping[str, Any]) -> Any:
        """The `transforms/request` validator's verdict on a `tools/call` request payload."""
        invocation = Invocation("transforms/request", "tools/call", Phase.REQUEST, payload)
        return self.stages.request(invocation)

    # what it promises -----------------------------------------------------------------------------------

    def replaces(self, detector: Detector, entity: str | None = None) -> bool:
        """Whether the redactor runs `detector` and does something other than keep its `entity`."""
        red = self.redactor
        if red is None or detector not in red.detectors:
            return False
        entities = (entity,) if entity is not None else detector.entities
        return any(not red.strategy_for(Finding(0, 0, "", e, detector)).keep for e in entities)

    def decoded_contexts(self) -> tuple[Context, ...]:
        """The encoded syntaxes (`ENCODED_CONTEXTS`) the target's redactor decodes (its `decode` option)."""
        decoder = self.redactor.decoder if self.redactor is not None else None
        if decoder is None:
            return ()
        return tuple(c for c in ENCODED_CONTEXTS if c.encoding in decoder.encodings)

    def contexts(self) -> tuple[Context, ...]:
        """The syntaxes the standard properties plant values in: `CONTEXTS` and the decoded encoded ones."""
        return (*CONTEXTS, *self.decoded_contexts())

    def replaces_keys(self) -> bool:
        """Whether values of the `sensitive_key` rule's entity would be replaced (the rule may be missing)."""
        red = self.redactor
        if red is None:
            return False
        return not red.table.resolve(("sensitive_field", "sensitive_key", "secret")).keep

    def formats(self, names: Iterable[str] | None = None, *, reference: bool = True) -> list[SecretFormat]:
        """A format per detector this target replaces (`names` narrows them). With `reference`, a detector
        named like a built-in is held to the built-in's format."""
        red = self.redactor
        if red is None:
            return []
        wanted = set(names) if names is not None else None
        out = []
        for detector in red.detectors:
            if wanted is not None and detector.name not in wanted:
                continue
            if not self.replaces(detector):
                continue
            builtin = BUILTIN_FORMATS.get(detector.name) if reference else None
            out.append(builtin if builtin is not None else format_for(detector))
        return out

    def secret_samples(
        self, formats: Sequence[SecretFormat] | None = None, *, min_length: int = MIN_SECRET_LENGTH
    ) -> st.SearchStrategy[Secret]:
        """Samples of the formats this target replaces, keeping those whose refined entity it replaces."""
        chosen = list(formats) if formats is not None else self.formats()
        if not chosen:
            raise ValueError(f"{self.name}: no detector whose findings this policy replaces")
        detectors = {f.name: self._detector_named(f.name) or f.detector for f in chosen}

        def kept(sample: Secret) -> bool:
            detector = detectors[sample.family]
            return (
                len(sample.value) >= min_length
                and self.replaces(detector, sample.entity)
                and not self.passes_through(detector, sample)
            )

        return one_of_evenly([f.samples for f in chosen]).filter(kept)

    def pseudonymises(self, sample: Secret) -> bool:
        """Whether the policy pseudonymises `sample` (its tokens may keep the shape, and so short parts, of it)."""
        detector = self._detector_named(sample.family)
        red = self.redactor
        if red is None or detector is None:
            return False
        return red.strategy_for(Finding(0, 0, "", sample.entity, detector)).kind == "pseudonymize"

    def passes_through(self, detector: Detector, sample: Secret) -> bool:
        """Whether the pseudonymizer gives `sample` back unchanged where the policy pseudonymises it: a vault
        keeps values that name nothing (wildcard ARNs, special addresses), so they are not planted."""
        red = self.redactor
        if red is None:
            return False
        strategy = red.strategy_for(Finding(0, 0, "", sample.entity, detector))
        if strategy.kind != "pseudonymize":
            return False
        entity = strategy.opt("as") or sample.entity
        namespace = self.pseudonymizer.namespace_for(None)
        return bool(self.pseudonymizer.tokenize(sample.value, entity, namespace) == sample.value)

    def detector(self, name: str) -> Detector:
        """The detector named `name`: the one the policy runs, else the one it declares (even if its findings
        are kept, so a test can show they leak), else the built-in. KeyError if there is none."""
        found = self._detector_named(name)
        if found is not None:
            return found
        for index, config in enumerate(self.sections.get("detectors") or ()):
            if isinstance(config, Mapping) and config.get("name") == name:
                return detector_from_config(config, f"detectors[{index}]")
        builtin = BUILTIN_BY_NAME.get(name)
        if builtin is None:
            raise KeyError(f"{self.name}: no detector {name!r}")
        return builtin

    def _detector_named(self, name: str) -> Detector | None:
        red = self.redactor
        if red is None:
            return None
        return next((d for d in red.detectors if d.name == name), None)


def _is_policy_document(source: Mapping[str, Any]) -> bool:
    """A policy document (access fields, roles, extends, …) rather than bare transform sections."""
    transform_keys = {"name", "description", "honor_hints", "transforms", "input_transforms", "transform_options",
                      "detectors", "disabled_detectors"}  # fmt: skip
    return bool(set(source) - transform_keys)


# --- running one property --------------------------------------------------------------------------------------

PROPERTY_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.data_too_large]


def property_settings(profile: str | None = None, *, weight: float = 1.0, base: settings | None = None) -> settings:
    """Settings for one property: the profile's (or the current) settings, `max_examples` scaled by `weight`."""
    from hypothesis import settings as settings_cls

    if profile is not None:
        register_profiles(replace=False)
    parent = base or (settings_cls.get_profile(profile) if profile else settings_cls.default)
    assert parent is not None
    return settings_cls(
        parent,
        max_examples=max(1, round(parent.max_examples * weight)),
        deadline=None,
        suppress_health_check=list({*parent.suppress_health_check, *PROPERTY_SUPPRESSED}),
    )


def run_property(
    name: str,
    strategy: st.SearchStrategy[Any],
    check: Callable[[Any], None],
    chosen: settings,
    examples: Sequence[Any] = (),
) -> None:
    """Run `check` on `strategy` under Hypothesis; the example database keys it by `name`. `examples` (draws that
    once failed) run first, under every profile."""

    def prop(case: Any) -> None:
        check(case)

    prop.__name__ = prop.__qualname__ = "property_" + re.sub(r"\W", "_", name)
    prop._hypothesis_internal_add_digest = name.encode()  # type: ignore[attr-defined]
    test: Any = given(strategy)(prop)
    for case in reversed(examples):
        test = example(case)(test)
    chosen(test)()


# --- the properties -----------------------------------------------------------------------------------------


def _no_secret_in_skeleton(case: McpCase) -> None:
    for part in case.embedded:
        assume(not find_leaks(part.skeleton, part.secrets))


def no_leak(
    target: RedactionTarget,
    *,
    formats: Sequence[SecretFormat] | None = None,
    contexts: Sequence[Context] | None = None,
    kinds: Sequence[str] = TRANSFORMED_KINDS,
) -> tuple[st.SearchStrategy[McpCase], Callable[[McpCase], None]]:
    """Planted secrets never come out of `target`, and its input payload is left as it was.

    `contexts` defaults to `target.contexts()`: the supported syntaxes and the encoded ones it decodes."""
    chosen = target.contexts() if contexts is None else contexts
    strategy = mcp_payloads(embedded(target.secret_samples(formats), contexts=chosen), kinds=kinds, max_parts=2)

    def check(case: McpCase) -> None:
        _no_secret_in_skeleton(case)
        before = copy.deepcopy(case.payload)
        out = target.transform(case.event, case.payload)
        assert case.payload == before, "the pipeline changed its input payload"
        # An encoded value that `sanitize` cut (a free-text cap) no longer decodes strictly: out of reach.
        assume(not (any(part.encoded for part in case.embedded) and _cut_before_redaction(out)))
        what = f"{case.kind} result ({case.embedded[0].context})"
        pseudonymised = [s for s in case.secrets if target.pseudonymises(s)]
        assert_no_leak(out, [s for s in case.secrets if s not in pseudonymised], what=what)
        assert_no_leak(out, pseudonymised, what=what, bounded=True)

    return strategy, check


def _cut_before_redaction(out: Any) -> bool:
    meta = out.get("_meta") if isinstance(out, dict) else None
    report = meta.get(META_KEY) if isinstance(meta, dict) else None
    untrusted = report.get("untrusted") if isinstance(report, dict) else None
    return isinstance(untrusted, dict) and bool(untrusted.get("truncated"))


@st.composite
def _sentence(draw: st.DrawFn, samples: st.SearchStrategy[Secret]) -> tuple[str, Secret]:
    sample = draw(samples)
    words = draw(st.lists(st.sampled_from(FILLER_WORDS), max_size=4))
    head = " ".join(words)
    tail = " ".join(draw(st.lists(st.sampled_from(FILLER_WORDS), max_size=3)))
    sep = draw(st.sampled_from([" ", "\n", ": ", " (", ' "']))
    end = {" (": ") ", ' "': '" '}.get(sep, " ")
    return f"{head}{sep}{sample.text}{end}{tail}", sample


def whole_values(
    target: RedactionTarget, *, formats: Sequence[SecretFormat] | None = None
) -> tuple[st.SearchStrategy[tuple[str, Secret]], Callable[[tuple[str, Secret]], None]]:
    """The target's scanner covers every planted value from its first to its last character."""
    red = target.redactor
    assert red is not None
    scanner = red.scanner

    def check(case: tuple[str, Secret]) -> None:
        text, sample = case
        start = text.find(sample.value)
        assume(start >= 0 and text.count(sample.value) == 1)
        end = start + len(sample.value)
        findings = [f for f in scanner.scan(text) if not red.strategy_for(f).keep]
        if any(f.start <= start and f.end >= end for f in findings):
            return
        near = [
            f"{f.detector.name}[{f.start - start:+d}..{f.end - end:+d}]"
            for f in findings
            if f.end > start and f.start < end
        ]
        detail = f"; overlapping findings (offsets from the value's ends): {', '.join(near)}" if near else ""
        raise AssertionError(f"{sample.family}: {mask(sample.value)} is not covered by one replacing finding{detail}")

    return _sentence(target.secret_samples(formats)), check


def decoys_survive(
    target: RedactionTarget,
    *,
    families: Sequence[str] = NEAR_MISS_FAMILIES,
    contexts: Sequence[Context] = CONTEXTS,
    kinds: Sequence[str] = TRANSFORMED_KINDS,
) -> tuple[st.SearchStrategy[McpCase], Callable[[McpCase], None]]:
    """Placeholders and near-misses come out exactly as they went in.

    Not in the encoded syntaxes by default: the assertion finds a re-spelled value only from 12 base64
    characters on (tests/interceptors/transforms/test_transforms_encoded.py checks decoys there byte for byte)."""
    samples = st.one_of(placeholders(), near_misses(families))
    strategy = mcp_payloads(embedded(samples, contexts=contexts), kinds=kinds)

    def check(case: McpCase) -> None:
        before = copy.deepcopy(case.payload)
        out = target.transform(case.event, case.payload)
        assert case.payload == before, "the pipeline changed its input payload"
        assert_not_redacted(out, case.decoys, what=f"{case.kind} result ({case.embedded[0].context})")

    return strategy, check


@st.composite
def _keyed_payload(draw: st.DrawFn) -> tuple[str, dict[str, Any], Any]:
    key, value = draw(keyed_secrets())
    node: Any = {key: value, "status": "ok"}
    for _ in range(draw(st.integers(0, 3))):
        node = [node] if draw(st.booleans()) else {draw(st.sampled_from(NEUTRAL_KEYS)): node}
    payload: dict[str, Any]
    if draw(st.booleans()):
        payload = {"content": [{"type": "text", "text": as_text(node)}]}
    else:
        payload = {"content": [{"type": "text", "text": "Done."}], "structuredContent": {"data": node}}
    return key, payload, value


def sensitive_keys(
    target: RedactionTarget,
) -> tuple[st.SearchStrategy[tuple[str, dict[str, Any], Any]], Callable[[tuple[str, dict[str, Any], Any]], None]]:
    """Values under sensitive keys (any case style, any depth, structured or JSON text) never come out."""

    def check(case: tuple[str, dict[str, Any], Any]) -> None:
        key, payload, value = case
        assume(normalize_key(key) not in ("", "status"))
        out = target.transform("tools/call", payload)
        assert_no_leak(out, [str(value)], what=f"tool result (value under {key!r})")

    return _keyed_payload(), check


def refuses_secret_arguments(
    target: RedactionTarget, *, formats: Sequence[SecretFormat] | None = None
) -> tuple[st.SearchStrategy[McpCase], Callable[[McpCase], None]]:
    """A `tools/call` whose arguments carry a secret the guard covers is refused, naming no value."""
    guard = target.guard
    assert guard is not None
    inner: Redactor = guard._redactor
    if formats is None:
        formats = [
            BUILTIN_FORMATS.get(d.name) or format_for(d) for d in inner.detectors if d.category in guard.categories
        ]  # fmt: skip
    eligible = [f for f in formats if any(d.name == f.name for d in inner.detectors) and f.category in guard.categories]
    if not eligible:
        raise ValueError("the guard covers no format")
    names = {d.name: d for d in inner.detectors}

    def covered(sample: Secret) -> bool:
        detector = names[sample.family]
        return (
            len(sample.value) >= MIN_SECRET_LENGTH
            and not inner.strategy_for(Finding(0, 0, "", sample.entity, detector)).keep
        )

    samples = one_of_evenly([f.samples for f in eligible]).filter(covered)
    strategy = tool_call_requests(embedded(samples, contexts=[c for c in CONTEXTS if c.name != "structured_key"]))

    def check(case: McpCase) -> None:
        verdict = target.request_verdict(case.payload)
        assert not verdict.valid, f"a tools/call carrying {case.secrets[0].family} was allowed"
        messages = [m.message for m in verdict.messages or ()]
        assert_no_leak([messages, dict(verdict.info or {})], case.secrets, what="refusal")

    return strategy, check


JWK_PRIVATE_KEY = '{"kty": "EC", "crv": "P-256", "d": "VEuNGVPsksDkY9FcdgkXNWWaa0t05LBAUagOd4t9ofT", "x": "abc"}'


def _guard_regressions(target: RedactionTarget, options: Mapping[str, Any]) -> list[McpCase]:
    """Draws `refuses_secret_arguments` once let through on plain `standard`: a JSON Web Key inside a JSON argument
    (a structured string, JSON text, JSON inside a JSON string). The guard parsed the JSON and, with the
    `sensitive_key` rule only, never looked at `d` beside `kty`: it now applies every key rule of its categories."""
    guard = target.guard
    if guard is None or options.get("formats") is not None:
        return []
    jwk = next((d for d in guard._redactor.detectors if d.name == "jwk_private_key"), None)
    if jwk is None or jwk.category not in guard.categories:
        return []
    value = JWK_PRIVATE_KEY.split('"d": "')[1].split('"')[0]
    secret = Secret(jwk.name, JWK_PRIVATE_KEY, value, jwk.entity, jwk.category)
    cases = []
    for context, shape in (("structured", "nested"), ("json", "list"), ("json_in_string", "list")):
        inner = render(CONTEXTS_BY_NAME[context], [secret], 0)
        argument: Any = {"options": {"query": inner.value}} if shape == "nested" else ["first", inner.value]
        payload = {"method": "tools/call", "params": {"name": "lookup", "arguments": {"query": argument}}}
        cases.append(McpCase("request", "tools/call", payload, (inner,), phase="request"))
    return cases


REGRESSIONS: dict[str, Callable[[RedactionTarget, Mapping[str, Any]], list[Any]]] = {
    "refuses_secret_arguments": _guard_regressions,
}
"""Per property: the draws that once failed against a shipped profile, built for a target (the `@example`s of
the standard properties; they run first under every profile)."""


@dataclass(frozen=True, slots=True)
class PropertySpec:
    name: str
    build: Callable[..., tuple[st.SearchStrategy[Any], Callable[[Any], None]]]
    weight: float
    applies: Callable[[RedactionTarget], bool]
    description: str = ""
    why_not: str = ""
    """Why the property cannot hold for a target it does not apply to (said up front, never skipped silently)."""
    announce: bool = True
    """Whether `run()` warns when it does not apply (False: there is simply nothing of that kind to check)."""


def own_format(
    target: RedactionTarget, *, formats: Sequence[SecretFormat] | None = None
) -> tuple[st.SearchStrategy[tuple[str, Secret]], Callable[[tuple[str, Secret]], None]]:
    """Each detector the target runs finds every sample of its independent format spec, whole, by itself."""
    chosen = [f for f in (formats if formats is not None else target.formats()) if f.origin == "spec"]
    if not chosen:
        raise ValueError(f"{target.name}: no detector with a format spec")
    scanners = {f.name: Scanner((target.detector(f.name),)) for f in chosen}

    def check(case: tuple[str, Secret]) -> None:
        text, sample = case
        start = text.find(sample.value)
        assume(start >= 0 and text.count(sample.value) == 1)
        end = start + len(sample.value)
        findings = scanners[sample.family].scan(text)
        if any(f.start <= start and f.end >= end for f in findings):
            return
        near = [f"[{f.start - start:+d}..{f.end - end:+d}]" for f in findings if f.end > start and f.start < end]
        detail = f"; its findings there (offsets from the value's ends): {', '.join(near)}" if near else ""
        raise AssertionError(
            f"{sample.family}: a sample of its format spec, {mask(sample.value)}, is not found whole by the detector "
            f"itself{detail}"
        )

    return _sentence(one_of_evenly([f.samples for f in chosen])), check


def boundary_detectors(target: RedactionTarget) -> list[tuple[Detector, TokenShape]]:
    """The custom detectors the target replaces whose pattern has a token shape, each with its documented shape
    (built-in detectors are held to their specs by `own_format` instead)."""
    out = []
    for fmt in target.formats():
        detector = target.detector(fmt.name)
        if BUILTIN_BY_NAME.get(detector.name) is detector:
            continue
        shape = documented_shape(detector)
        if shape is not None:
            out.append((detector, shape))
    return out


@st.composite
def _boundary_case(draw: st.DrawFn, draws: st.SearchStrategy[BoundaryDraw]) -> tuple[str, BoundaryDraw]:
    drawn = draw(draws)
    head = " ".join(draw(st.lists(st.sampled_from(FILLER_WORDS), max_size=3)))
    sep, end = draw(st.sampled_from([(" ", " "), ("\n", "\n"), (": ", "."), (' "', '" '), ("=", ";"), ("(", ")")]))
    return f"{head}{sep}{drawn.secret.text}{end}done", drawn


def _raw_covers(detector: Detector, text: str, start: int, end: int) -> bool:
    """Whether the pattern alone (before the validator) reports a span covering `text[start:end]`."""
    groups = detector.group if isinstance(detector.group, tuple) else (detector.group,)
    for match in detector.pattern.finditer(text):
        group = next((g for g in groups if match.start(g) >= 0), None)
        if group is not None and match.start(group) <= start and match.end(group) >= end:
            return True
    return False


def boundaries(
    target: RedactionTarget, *, detectors: Sequence[str] | None = None
) -> tuple[st.SearchStrategy[tuple[str, BoundaryDraw]], Callable[[tuple[str, BoundaryDraw]], None]]:
    """Each custom detector finds, whole and by itself, the tokens at the edges of its documented format
    (exact lengths, alphabet edges, the last character, every prefix variant), and never only part of a token
    one character off that length (`interceptors.testing.boundaries`)."""
    chosen = [(d, s) for d, s in boundary_detectors(target) if detectors is None or d.name in detectors]
    if not chosen:
        raise ValueError(f"{target.name}: no custom detector with a token shape (a prefix, then one class repeated)")
    for detector, shape in chosen:
        if "examples" not in shape.origin and not detector.spec:
            warnings.warn(
                UndocumentedFormat(
                    f"{detector.name}: no examples: or spec:, so its length and alphabet are checked against its "
                    "own pattern only (a documented token in examples: lets the kit catch an off-by-one there)"
                ),
                stacklevel=4,
            )
    scanners = {d.name: Scanner((d,)) for d, _ in chosen}
    shapes = {d.name: (d, s) for d, s in chosen}

    def check(case: tuple[str, BoundaryDraw]) -> None:
        text, drawn = case
        value = drawn.secret.value
        start = text.find(value)
        assume(start >= 0 and text.count(value) == 1)
        end = start + len(value)
        detector, shape = shapes[drawn.secret.family]
        findings = scanners[detector.name].scan(text)
        if any(f.start <= start and f.end >= end for f in findings):
            return
        near = [f for f in findings if f.end > start and f.start < end]
        if drawn.exact and not near and _raw_covers(detector, text, start, end):
            assume(False)  # the pattern covers it; its validator declined this draw (e.g. too little entropy)
        if not drawn.exact and not near:
            return  # one character off the documented length: not a token, and nothing of it is taken
        offsets = ", ".join(f"[{f.start - start:+d}..{f.end - end:+d}]" for f in near)
        documented = (
            f"documented format (from its {shape.origin}): one of {', '.join(map(repr, shape.prefixes))}, then "
            f"{shape.low}..{shape.high} characters of {shape.alphabet_name or repr(shape.alphabet)}"
        )
        if drawn.exact:
            problem = "is not found whole by the detector itself"
        else:
            problem = "is found only in part by the detector itself (the rest of the token would stay in the output)"
        detail = f"; its findings there (offsets from the token's ends): {offsets}" if near else ""
        raise AssertionError(
            f"{detector.name}: a boundary token ({drawn.what}), {mask(value)}, {problem}{detail}. Its {documented}"
        )

    return _boundary_case(one_of_evenly([boundary_samples(d, s) for d, s in chosen])), check


class UndocumentedFormat(UserWarning):
    """A custom detector documents its format neither by `spec:` nor by `examples:`: the kit can check it only
    against its own pattern."""


def _has_formats(target: RedactionTarget) -> bool:
    return bool(target.formats())


def _has_spec_formats(target: RedactionTarget) -> bool:
    return any(f.origin == "spec" for f in target.formats())


STANDARD_PROPERTIES: dict[str, PropertySpec] = {
    spec.name: spec
    for spec in (
        PropertySpec("no_leak", no_leak, 10.0, _has_formats, "planted secrets never come out",
                     "its output pipeline replaces no detector's findings"),
        PropertySpec("whole_values", whole_values, 5.0, _has_formats, "every planted value is covered entirely",
                     "its output pipeline replaces no detector's findings"),
        PropertySpec("own_format", own_format, 4.0, _has_spec_formats, "each detector finds its own format spec",
                     "no detector it replaces has a format spec (spec: or examples:)"),
        PropertySpec("boundaries", boundaries, 2.0, lambda t: bool(boundary_detectors(t)),
                     "custom detectors find tokens at the edges of their documented format",
                     "no custom detector it replaces has a token shape (a prefix, then one class repeated)", False),
        PropertySpec("decoys_survive", decoys_survive, 6.0, lambda t: True, "placeholders and near-misses survive"),
        PropertySpec("sensitive_keys", sensitive_keys, 3.0, RedactionTarget.replaces_keys, "keys hide their values",
                     "its output pipeline keeps values under sensitive keys (no sensitive_key rule, or kept)"),
        PropertySpec(
            "refuses_secret_arguments", refuses_secret_arguments, 3.0, lambda t: t.guard is not None,
            "secret arguments are refused", "it has no guard_secrets input transform in reject mode",
        ),
    )
}  # fmt: skip


def _env_profile() -> str | None:
    return os.environ.get("MCP_INTERCEPTORS_TESTING_PROFILE") or None


class PropertiesNotApplicable(UserWarning):
    """Standard properties a policy cannot satisfy by design (a policy without a guard cannot refuse arguments):
    `RedactionSuite.run()` warns with each and why before it runs the others."""


def redacts_nothing(target: RedactionTarget) -> bool:
    """Whether the target's output pipeline replaces nothing a leak property could plant (no detector's
    findings, no value under a sensitive key): every leak property would pass without testing anything."""
    return not target.formats() and not target.replaces_keys()


@dataclass
class RedactionSuite:
    """The standard properties against one target, with a chosen Hypothesis profile (None: the current one)."""

    target: RedactionTarget
    profile: str | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Keyword arguments per property (e.g. `{"no_leak": {"formats": [...]}}`)."""
    properties: tuple[str, ...] | None = None
    """What `run()` runs by default (None: every applicable property)."""
    expect_no_redaction: bool = False
    """Say that the policy is meant to redact nothing (`open`): without it, `run()` fails on such a policy."""
    ran: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """The standard properties the last `run()` did not run, each with why the policy cannot satisfy it."""

    def applicable(self, names: Iterable[str] | None = None) -> list[str]:
        return [n for n in self._chosen(names) if STANDARD_PROPERTIES[n].applies(self.target)]

    def not_applicable(self, names: Iterable[str] | None = None) -> dict[str, str]:
        """The chosen properties that cannot hold for this target by design, each with the reason."""
        return {
            n: f"{STANDARD_PROPERTIES[n].name} cannot hold for policy {self.target.name!r}: "
            f"{STANDARD_PROPERTIES[n].why_not}"
            for n in self._chosen(names)
            if not STANDARD_PROPERTIES[n].applies(self.target)
        }

    def _chosen(self, names: Iterable[str] | None) -> list[str]:
        if names is None:
            names = self.properties
        chosen = list(names) if names is not None else list(STANDARD_PROPERTIES)
        unknown = [n for n in chosen if n not in STANDARD_PROPERTIES]
        if unknown:
            raise ValueError(f"unknown properties: {', '.join(unknown)} (known: {', '.join(STANDARD_PROPERTIES)})")
        return chosen

    def check(self, name: str, *, weight: float | None = None, **options: Any) -> None:
        """Run one property (raising its failure)."""
        spec = STANDARD_PROPERTIES[name]
        merged = {**self.options.get(name, {}), **options}
        strategy, check = spec.build(self.target, **merged)
        chosen = property_settings(self.profile or _env_profile(), weight=spec.weight if weight is None else weight)
        self.ran.append(name)
        examples = REGRESSIONS[name](self.target, merged) if name in REGRESSIONS else []
        run_property(f"{name}:{self.target.name}", strategy, check, chosen, examples)

    def run(self, names: Iterable[str] | None = None) -> list[str]:
        """Run the applicable properties; raise `PropertyFailures` listing every one that failed.

        No silent greens: a policy that redacts nothing fails (`redacts_something`) unless the suite says
        `expect_no_redaction`; a property named explicitly (`names` or `properties`) that the policy cannot
        satisfy by design fails up front with the reason; and with the default list, those properties are
        announced by a `PropertiesNotApplicable` warning (and kept in `skipped`) before the others run."""
        __tracebackhide__ = True
        explicit = names is not None or self.properties is not None
        missing = self.not_applicable(names)
        if explicit and missing:
            raise PropertyFailures({name: AssertionError(reason) for name, reason in missing.items()})
        failures: dict[str, BaseException] = {}
        if not self.expect_no_redaction and redacts_nothing(self.target):
            failures["redacts_something"] = AssertionError(
                f"policy {self.target.name!r} redacts nothing: its output pipeline "
                f"({' → '.join(self.target.output.types) or 'no transforms'}) replaces no detector's findings and "
                "no value under a sensitive key, so every secret planted in a result would come out as it went in "
                "(and every leak property would pass without testing anything). Pass expect_no_redaction=True "
                "if that is what this policy is for."
            )
        self.skipped = dict(missing)
        announced = [reason for name, reason in missing.items() if STANDARD_PROPERTIES[name].announce]
        if announced and not failures and not self.expect_no_redaction:
            warnings.warn(PropertiesNotApplicable("; ".join(announced) + " (not run)"), stacklevel=2)
        done = []
        for name in self.applicable(names):
            try:
                self.check(name)
            except Exception as exc:
                failures[name] = exc
            done.append(name)
        if failures:
            raise PropertyFailures(failures)
        return done


def check_redaction_rules(
    policy: Any,
    *,
    profile: str | None = None,
    properties: Iterable[str] | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    pseudonymizer: Pseudonymizer | None = None,
    expect_no_redaction: bool = False,
) -> list[str]:
    """Run the standard properties against a policy (anything `RedactionTarget.load` reads).

    `profile` names a Hypothesis profile (`default`, `ci`, `thorough`); None uses the loaded one. Returns
    the names of the properties that ran; raises `PropertyFailures` naming every one that failed. A policy
    that redacts nothing (`open`, or one extending it) fails unless `expect_no_redaction=True`.
    """
    target = RedactionTarget.load(policy, pseudonymizer=pseudonymizer)
    suite = RedactionSuite(
        target, profile, {k: dict(v) for k, v in (options or {}).items()}, expect_no_redaction=expect_no_redaction
    )
    return suite.run(properties)
