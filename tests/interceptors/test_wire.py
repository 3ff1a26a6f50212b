"""SEP-2624 wire models and canonical JSON: round trips, omitted defaults, strict readers (hypothesis)."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from interceptors import (
    Compat,
    Hook,
    InterceptorInfo,
    InterceptorType,
    InvocationContext,
    InvokeParams,
    Mode,
    MutationResult,
    Phase,
    Principal,
    Priority,
    Suggestion,
    ValidationMessage,
    ValidationResult,
    Verdict,
    WireError,
    canonical,
    result_from_wire,
)
from interceptors.outcomes import to_validation_result
from interceptors.priority import INT32_MAX, INT32_MIN
from interceptors.wire import PRINCIPAL_TYPES

# Strategies ----------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)
json_objects = st.dictionaries(st.text(max_size=6), json_values, max_size=4)

names = st.text(min_size=1, max_size=12)
opt_text = st.none() | st.text(max_size=10)
int32 = st.integers(min_value=INT32_MIN, max_value=INT32_MAX)
phases = st.sampled_from(list(Phase))

hooks = st.builds(Hook, st.lists(names, max_size=3).map(tuple), phases)
priorities = st.builds(Priority, int32, int32) | int32.map(lambda n: Priority(n, n))
compats = st.builds(Compat, names, opt_text)
infos = st.builds(
    InterceptorInfo,
    name=names,
    type=st.sampled_from(list(InterceptorType)),
    hooks=st.lists(hooks, max_size=3).map(tuple),
    version=opt_text,
    description=opt_text,
    priority_hint=priorities,
    compat=st.none() | compats,
    config_schema=st.none() | json_objects,
    mode=st.sampled_from(list(Mode)),
    fail_open=st.booleans(),
)
principals = st.builds(Principal, st.sampled_from(sorted(PRINCIPAL_TYPES)), opt_text, st.none() | json_objects)
contexts = st.builds(
    InvocationContext,
    principal=st.none() | principals,
    trace_id=opt_text,
    span_id=opt_text,
    timestamp=names,
    session_id=opt_text,
)
messages = st.builds(ValidationMessage, st.text(max_size=10), names, opt_text)
suggestions = st.builds(Suggestion, st.text(max_size=10), json_values)
durations = st.none() | st.floats(min_value=0, max_value=1e9) | st.integers(min_value=0, max_value=10**9)
validation_results = st.builds(
    ValidationResult,
    interceptor=names,
    phase=phases,
    valid=st.booleans(),
    severity=st.none() | st.sampled_from(["error", "warn", "info", "custom"]),
    messages=st.none() | st.lists(messages, max_size=3).map(tuple),
    suggestions=st.none() | st.lists(suggestions, max_size=2).map(tuple),
    duration_ms=durations,
    info=st.none() | json_objects,
)
mutation_results = st.builds(
    MutationResult,
    interceptor=names,
    phase=phases,
    modified=st.booleans(),
    payload=json_values,
    duration_ms=durations,
    info=st.none() | json_objects,
)
invoke_params = st.builds(
    InvokeParams,
    name=names,
    event=names,
    phase=phases,
    payload=json_values,
    timeout_ms=st.none() | st.integers(min_value=1, max_value=2**40),
    config=st.none() | json_objects,
    context=st.none() | contexts,
)


def through_json(value: Any) -> Any:
    """What a peer actually receives: real JSON bytes, parsed again."""
    return orjson.loads(orjson.dumps(value))


# Round trips -------------------------------------------------------------------------------------

ROUND_TRIPPED = [
    (Compat, compats),
    (InterceptorInfo, infos),
    (Principal, principals),
    (InvocationContext, contexts),
    (ValidationMessage, messages),
    (Suggestion, suggestions),
    (ValidationResult, validation_results),
    (MutationResult, mutation_results),
    (InvokeParams, invoke_params),
    (Priority, priorities),
]


@pytest.mark.parametrize(("model", "strategy"), ROUND_TRIPPED, ids=[m.__name__ for m, _ in ROUND_TRIPPED])
@given(data=st.data())
def test_round_trip_and_stable_writer(model: Any, strategy: Any, data: st.DataObject) -> None:
    value = data.draw(strategy)
    wire = value.to_wire()
    back = model.from_wire(through_json(wire))
    assert back == value
    # Writing is stable: same JSON bytes again, and again after a round trip.
    assert orjson.dumps(value.to_wire()) == orjson.dumps(wire)
    assert orjson.dumps(back.to_wire()) == orjson.dumps(wire)


@given(hooks)
def test_hook_round_trip_returns_a_one_hook_tuple(hook: Hook) -> None:
    back = Hook.from_wire(through_json(hook.to_wire()))
    assert back == (hook,)
    assert back[0].to_wire() == hook.to_wire()


@given(validation_results | mutation_results)
def test_result_from_wire_dispatches_on_type(result: ValidationResult | MutationResult) -> None:
    assert result_from_wire(through_json(result.to_wire())) == result


# Omitted defaults ----------------------------------------------------------------------------------


def test_bare_descriptor_is_exactly_name_type_hooks() -> None:
    info = InterceptorInfo("a", InterceptorType.VALIDATION, (Hook(("tools/call",), Phase.REQUEST),))
    assert info.to_wire() == {
        "name": "a",
        "type": "validation",
        "hooks": [{"events": ["tools/call"], "phase": "request"}],
    }
    explicit_defaults = InterceptorInfo(
        "a", InterceptorType.MUTATION, (), priority_hint=Priority(0, 0), mode=Mode.ACTIVE, fail_open=False
    )
    assert explicit_defaults.to_wire() == {"name": "a", "type": "mutation", "hooks": []}


def test_non_default_descriptor_fields_are_written() -> None:
    info = InterceptorInfo(
        "a",
        InterceptorType.MUTATION,
        (),
        version="1",
        description="",
        priority_hint=Priority(-5, 0),
        compat=Compat("2025-11-25"),
        config_schema={"type": "object"},
        mode=Mode.AUDIT,
        fail_open=True,
    )
    assert info.to_wire() == {
        "name": "a",
        "type": "mutation",
        "hooks": [],
        "version": "1",
        "description": "",
        "priorityHint": {"request": -5},
        "compat": {"minProtocol": "2025-11-25"},
        "configSchema": {"type": "object"},
        "mode": "audit",
        "failOpen": True,
    }


@pytest.mark.parametrize("phase", list(Phase))
def test_passing_validation_result_has_no_severity_or_messages(phase: Phase) -> None:
    expected = {"interceptor": "v", "type": "validation", "phase": phase.value, "valid": True}
    assert ValidationResult("v", phase, True).to_wire() == expected
    assert to_validation_result(Verdict.allow(), "v", phase).to_wire() == expected
    assert to_validation_result(None, "v", phase).to_wire() == expected
    assert to_validation_result(True, "v", phase).to_wire() == expected


def test_other_writers_omit_defaults() -> None:
    assert Compat("2025-11-25").to_wire() == {"minProtocol": "2025-11-25"}
    assert Principal("anonymous").to_wire() == {"type": "anonymous"}
    assert InvocationContext(timestamp="t").to_wire() == {"timestamp": "t"}
    assert ValidationMessage("m").to_wire() == {"message": "m", "severity": "error"}
    assert MutationResult("m", Phase.RESPONSE, False, None).to_wire() == {
        "interceptor": "m",
        "type": "mutation",
        "phase": "response",
        "modified": False,
        "payload": None,
    }
    assert InvokeParams("n", "tools/call", Phase.REQUEST, {}).to_wire() == {
        "name": "n",
        "event": "tools/call",
        "phase": "request",
        "payload": {},
    }


def test_default_context_timestamp_is_utc_milliseconds() -> None:
    stamp = InvocationContext().timestamp
    assert stamp.endswith("Z")
    assert len(stamp) == len("2026-01-01T00:00:00.000Z")


@given(st.lists(st.integers(min_value=0, max_value=4_102_444_800_000_000_000), min_size=1, max_size=5))
def test_timestamps_are_the_iso_form_of_the_clock_at_millisecond_precision(clock_ns: list[int]) -> None:
    """Whatever the clock reads, in whatever order (the formatted second is remembered between calls)."""
    from datetime import UTC, datetime, timedelta

    from interceptors import wire

    for now in clock_ns:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(wire.time, "time_ns", lambda now=now: now)
            stamp = wire.utc_timestamp()
        moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=now // 1_000_000)
        assert stamp == moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# Priority ----------------------------------------------------------------------------------------


@given(int32)
def test_priority_reads_an_int32_as_both_phases(value: int) -> None:
    assert Priority.from_wire(value) == Priority(value, value)


@given(st.fixed_dictionaries({}, optional={"request": int32, "response": int32}))
def test_priority_reads_an_object_missing_side_is_zero(value: dict[str, int]) -> None:
    assert Priority.from_wire(value) == Priority(value.get("request", 0), value.get("response", 0))


not_int32 = (
    st.booleans()
    | st.integers(max_value=INT32_MIN - 1)
    | st.integers(min_value=INT32_MAX + 1)
    | st.floats().filter(lambda f: not f.is_integer() or not INT32_MIN <= f <= INT32_MAX)
    | st.text(max_size=5)
    | st.none()
    | st.lists(st.integers(), max_size=2)
)


@given(not_int32)
@example(True)
@example(False)
@example(1.5)
@example(float("nan"))
@example(2.0**31)
@example(2**31)
@example(-(2**31) - 1)
@example("1")
@example(None)
def test_priority_rejects_anything_but_int32_or_object(value: Any) -> None:
    with pytest.raises(WireError):
        Priority.from_wire(value)


@given(st.integers(min_value=INT32_MIN, max_value=INT32_MAX))
@example(0)
@example(-5)
def test_an_integral_float_is_the_integer_it_equals(value: int) -> None:
    """JSON has one number type: peers that send 5.0 mean 5 (priorities, `timeoutMs`)."""
    as_float = Priority.from_wire(float(value)) if abs(value) < 2**53 else Priority.from_wire(value)
    assert as_float == Priority.from_wire(value)
    assert type(as_float.request) is int
    params = {"name": "n", "event": "e/e", "phase": "request", "payload": 1}
    if value > 0:
        parsed = InvokeParams.from_wire({**params, "timeoutMs": float(value)})
        assert parsed.timeout_ms == value and type(parsed.timeout_ms) is int
    else:
        with pytest.raises(WireError, match="timeoutMs"):
            InvokeParams.from_wire({**params, "timeoutMs": float(value)})
    with pytest.raises(WireError, match="timeoutMs"):
        InvokeParams.from_wire({**params, "timeoutMs": value + 0.5})


@given(
    st.fixed_dictionaries({}, optional={"request": int32, "response": int32}),
    st.text(min_size=1, max_size=8).filter(lambda k: k not in ("request", "response")),
    json_values,
)
def test_priority_rejects_objects_with_other_keys(base: dict[str, Any], key: str, value: Any) -> None:
    with pytest.raises(WireError):
        Priority.from_wire({**base, key: value})


@given(st.sampled_from(["request", "response"]), not_int32)
def test_priority_rejects_objects_with_bad_values(key: str, value: Any) -> None:
    with pytest.raises(WireError):
        Priority.from_wire({key: value})


@given(int32, int32)
def test_priority_writes_int_when_equal_else_object_without_zero_sides(request: int, response: int) -> None:
    wire = Priority(request, response).to_wire()
    if request == response:
        assert wire == request
        assert type(wire) is int
    else:
        expected = {}
        if request:
            expected["request"] = request
        if response:
            expected["response"] = response
        assert wire == expected
    assert Priority.from_wire(through_json(wire)) == Priority(request, response)


def test_priority_examples() -> None:
    assert Priority().to_wire() == 0
    assert Priority(-1000, 0).to_wire() == {"request": -1000}
    assert Priority(0, 7).to_wire() == {"response": 7}
    assert Priority(1, 2).to_wire() == {"request": 1, "response": 2}
    assert Priority.from_wire({}) == Priority()
    assert Priority(3, 9).resolve(Phase.RESPONSE) == 9
    assert Priority(3, 9).resolve("request") == 3


@pytest.mark.parametrize("bad", [(True, 0), (0, 1.5), (INT32_MAX + 1, 0), (0, INT32_MIN - 1)])
def test_priority_constructor_checks_int32(bad: tuple[Any, Any]) -> None:
    with pytest.raises(WireError):
        Priority(*bad)


# Descriptor readers ------------------------------------------------------------------------------


def _descriptor(**extra: Any) -> dict[str, Any]:
    return {"name": "x", "type": "validation", "hooks": [{"events": ["tools/call"], "phase": "request"}]} | extra


@pytest.mark.parametrize("kind", ["validator", "observability", "sink", "", None, 1, "VALIDATION"])
def test_unknown_type_is_a_wire_error(kind: Any) -> None:
    with pytest.raises(WireError) as info:
        InterceptorInfo.from_wire(_descriptor(type=kind))
    assert info.value.path == "interceptor.type"


@pytest.mark.parametrize("mode", ["enforcing", "on", "off", "ACTIVE", 1, True])
def test_unknown_mode_is_a_wire_error(mode: Any) -> None:
    with pytest.raises(WireError) as info:
        InterceptorInfo.from_wire(_descriptor(mode=mode))
    assert info.value.path == "interceptor.mode"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("enforce", Mode.ACTIVE), ("active", Mode.ACTIVE), ("audit", Mode.AUDIT), ("", Mode.ACTIVE)],
)
def test_known_and_legacy_modes(mode: str, expected: Mode) -> None:
    info = InterceptorInfo.from_wire(_descriptor(mode=mode))
    assert info.mode is expected
    assert "mode" not in info.to_wire() or info.to_wire()["mode"] == "audit"


def test_legacy_both_phase_hook_expands_request_first() -> None:
    info = InterceptorInfo.from_wire(_descriptor(hooks=[{"events": ["tools/call", "prompts/get"], "phase": "both"}]))
    events = ("tools/call", "prompts/get")
    assert info.hooks == (Hook(events, Phase.REQUEST), Hook(events, Phase.RESPONSE))
    assert Hook.from_wire({"events": ["a/b"], "phase": "both"}) == (
        Hook(("a/b",), Phase.REQUEST),
        Hook(("a/b",), Phase.RESPONSE),
    )


def test_legacy_single_hook_key_is_read() -> None:
    data = {"name": "x", "type": "mutation", "hook": {"events": ["tools/call"], "phase": "response"}}
    assert InterceptorInfo.from_wire(data).hooks == (Hook(("tools/call",), Phase.RESPONSE),)


@pytest.mark.parametrize(
    "bad",
    [
        {"hooks": None},
        {"hooks": {"events": ["a/b"], "phase": "request"}},
        {"hooks": [{"events": "tools/call", "phase": "request"}]},
        {"hooks": [{"events": [""], "phase": "request"}]},
        {"hooks": [{"events": ["a/b"], "phase": "sideways"}]},
        {"name": ""},
        {"name": 3},
        {"failOpen": "yes"},
        {"priorityHint": 1.5},
        {"priorityHint": {"request": 1, "other": 2}},
        {"configSchema": "object"},
        {"compat": {"maxProtocol": "2026-07-28"}},
        {"version": 1},
    ],
)
def test_malformed_descriptors_are_wire_errors(bad: dict[str, Any]) -> None:
    with pytest.raises(WireError):
        InterceptorInfo.from_wire(_descriptor(**bad))


@pytest.mark.parametrize(
    ("model", "value"),
    [
        (Principal, {"type": "robot"}),
        (Principal, {"type": "user", "claims": []}),
        (InvocationContext, {}),
        (InvocationContext, {"timestamp": ""}),
        (InvocationContext, {"timestamp": "t", "principal": {"type": "x"}}),
        (ValidationResult, {"interceptor": "v", "type": "mutation", "phase": "request", "valid": True}),
        (ValidationResult, {"interceptor": "v", "type": "validation", "phase": "request", "valid": 1}),
        (MutationResult, {"interceptor": "m", "type": "mutation", "phase": "request", "modified": True}),
        (InvokeParams, {"name": "n", "event": "e/e", "phase": "both", "payload": {}}),
        (InvokeParams, {"name": "n", "event": "e/e", "phase": "request"}),
        (InvokeParams, {"name": "n", "event": "e/e", "phase": "request", "payload": 1, "timeoutMs": 0}),
        (InvokeParams, {"name": "n", "event": "e/e", "phase": "request", "payload": 1, "timeoutMs": True}),
        (Suggestion, {"path": "/a"}),
    ],
)
def test_strict_readers(model: Any, value: Any) -> None:
    with pytest.raises(WireError):
        model.from_wire(value)


def test_principal_type_is_checked_on_construction() -> None:
    with pytest.raises(WireError):
        Principal("robot")


# Canonical JSON ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (-0.0, "0"),
        (0.0, "0"),
        (100.0, "100"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (1e20, "100000000000000000000"),
        (123e-20, "1.23e-18"),
        (10**21, "1e+21"),
        (2**53, "9007199254740992"),
        (-7, "-7"),
    ],
)
def test_canonical_numbers(number: float, text: str) -> None:
    assert canonical(number) == text


def _bits(hex_bits: str) -> float:
    return float(struct.unpack(">d", bytes.fromhex(hex_bits))[0])


# IEEE 754 bit patterns and their ECMAScript forms, the number samples RFC 8785 Appendix B publishes.
@pytest.mark.parametrize(
    ("bits", "text"),
    [
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ],
)
def test_canonical_numbers_rfc8785_samples(bits: str, text: str) -> None:
    assert canonical(_bits(bits)) == text


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_canonical_rejects_non_finite_numbers(bad: float) -> None:
    with pytest.raises(ValueError):
        canonical(bad)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_canonical_float_is_shortest_round_trip_in_ecmascript_notation(value: float) -> None:
    text = canonical(value)
    assert float(text) == value
    magnitude = abs(value)
    if value == 0:
        assert text == "0"
        return
    if 1e-6 <= magnitude < 1e21:
        assert "e" not in text
    else:
        assert "e" in text
        mantissa, exponent = text.split("e")
        assert exponent[0] in "+-"
        assert not exponent[1:].startswith("0")
        assert "." not in mantissa or not mantissa.endswith("0")
    assert not text.endswith(".0")
    assert not text.startswith("+")
    # Shortest digits: the same significant digits as Python's shortest repr.
    significant = repr(magnitude).split("e")[0].replace(".", "").strip("0")
    assert text.lstrip("-").split("e")[0].replace(".", "").strip("0") == significant


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\x00", '"\\u0000"'),
        ("\x1f", '"\\u001f"'),
        ("\x1a\x0b", '"\\u001a\\u000b"'),
        ("\b\t\n\f\r", '"\\b\\t\\n\\f\\r"'),
        ('"\\', '"\\"\\\\"'),
        ("/", '"/"'),
        ("\x7f", '"\x7f"'),
        ("é€\u2028😀", '"é€\u2028😀"'),
    ],
)
def test_canonical_strings(text: str, expected: str) -> None:
    assert canonical(text) == expected


def test_canonical_literals_and_containers() -> None:
    assert canonical(None) == "null"
    assert canonical(True) == "true"
    assert canonical(False) == "false"
    assert canonical([1, [], {}, (2,)]) == "[1,[],{},[2]]"
    assert canonical({"b": [1, {"d": 1, "c": 2}], "a": None}) == '{"a":null,"b":[1,{"c":2,"d":1}]}'
    with pytest.raises(TypeError):
        canonical({1, 2})


def test_canonical_key_order_is_utf16_code_units() -> None:
    # Astral characters are surrogate pairs (0xD8xx) in UTF-16, so they sort before U+E000..U+FFFF.
    assert canonical({"\ue000": 1, "\U0001f600": 2}) == '{"\U0001f600":2,"\ue000":1}'
    # The RFC 8785 sorting example.
    data = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    order = [value for _, value in json.loads(canonical(data), object_pairs_hook=lambda pairs: pairs)]
    assert order == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]


def _utf16_units(text: str) -> list[int]:
    units: list[int] = []
    for char in text:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    return units


@given(st.dictionaries(st.text(max_size=4), st.integers(0, 9), max_size=8))
def test_canonical_key_order_property(data: dict[str, int]) -> None:
    pairs = json.loads(canonical(data), object_pairs_hook=lambda p: p)
    keys = [key for key, _ in pairs]
    assert keys == sorted(data, key=_utf16_units)
    assert dict(pairs) == data


ascii_keys = st.text(alphabet=st.characters(codec="ascii"), max_size=6)
float_free_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**21) + 1, max_value=10**21 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ascii_keys, inner, max_size=4),
    max_leaves=12,
)


@given(float_free_json)
def test_canonical_matches_sorted_compact_json_without_floats(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical(value) == expected


def _numbers_as_floats(value: Any) -> Any:
    """JSON has one number type: ECMAScript may print an integral float without a fraction."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(item) for item in value]
    return {key: _numbers_as_floats(item) for key, item in value.items()}


@given(json_values)
def test_canonical_is_a_fixed_point_of_parsing(value: Any) -> None:
    text = canonical(value)
    assert _numbers_as_floats(json.loads(text)) == _numbers_as_floats(value)
    assert canonical(json.loads(text)) == text


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=5), st.randoms())
def test_canonical_ignores_insertion_order(data: dict[str, Any], rnd: Any) -> None:
    items = list(data.items())
    rnd.shuffle(items)
    assert canonical(dict(items)) == canonical(data)
