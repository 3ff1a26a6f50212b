"""The codec's shortcuts for the stdio lane hold for any JSON text: the sampled digit-run scan finds every run the
whole scan finds, and `written_size_bound` bounds what orjson writes of any value read from a text."""

from __future__ import annotations

import itertools
import re
import struct
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from interceptors.codec import _GROWTH, _WRITE_MAX_DEPTH, may_round_numbers, written_size_bound

LONG_RUN = re.compile(rb"[0-9]{19}")

# Bytes rich in digit runs of every length around 19, at every offset.
DIGITS = st.text("0123456789", min_size=1, max_size=40).map(str.encode)
FILLER = st.binary(max_size=12) | st.sampled_from([b" ", b'"', b",", b"e", b"."])
DIGIT_RICH = st.lists(DIGITS | FILLER, max_size=12).map(b"".join)


@given(DIGIT_RICH | st.binary(max_size=300))
def test_the_sampled_scan_finds_exactly_the_runs_the_whole_scan_finds(data: bytes) -> None:
    assert may_round_numbers(data) == (LONG_RUN.search(data) is not None)


# JSON texts written every way a peer may write them: whitespace, escapes, floats in exponent form, big integers.
SPACE = st.sampled_from(["", " ", "\n", "\t  ", "\r\n"])


def _escaped(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:
        high, low = divmod(code - 0x10000, 0x400)
        return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04X}"
    return f"\\u{code:04x}"


CHARS = st.characters(exclude_categories=["Cs"])
STRING_PART = st.one_of(
    CHARS.filter(lambda c: c not in '"\\' and ord(c) >= 0x20),
    CHARS.map(_escaped),
    st.sampled_from(['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"]),
)
STRING = st.lists(STRING_PART, max_size=8).map(lambda parts: '"' + "".join(parts) + '"')
INTEGER = st.integers(-(2**63), 2**64 - 1).map(str) | st.integers(-(10**30), 10**30).map(str)
FLOAT = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}",
    st.sampled_from(["", "-"]),
    st.integers(0, 10**20).map(str),
    st.sampled_from(["", ".0", ".5"]) | st.integers(0, 10**20).map(lambda n: f".{n}"),
    st.sampled_from(["", "e5", "E+15", "e-7", "e15", "e300", "e-300"]) | st.integers(-320, 308).map(lambda n: f"e{n}"),
)
SCALAR = st.one_of(st.sampled_from(["true", "false", "null"]), INTEGER, FLOAT, STRING)


def _array(items: list[tuple[str, str, str]]) -> str:
    return "[" + ",".join(f"{before}{item}{after}" for before, item, after in items) + "]"


def _object(members: list[tuple[str, str, str, str, str]]) -> str:
    written = (f"{before}{key}{middle}:{value}{after}" for before, key, middle, value, after in members)
    return "{" + ",".join(written) + "}"


TEXT = st.recursive(
    SCALAR,
    lambda children: (
        st.lists(st.tuples(SPACE, children, SPACE), max_size=5).map(_array)
        | st.lists(st.tuples(SPACE, STRING, SPACE, children, SPACE), max_size=5).map(_object)
    ),
    max_leaves=20,
)


def _values(value: Any) -> list[Any]:
    """`value` and every value inside it."""
    found = [value]
    if isinstance(value, dict):
        for item in value.values():
            found.extend(_values(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_values(item))
    return found


@given(TEXT, st.integers(0, 300))
def test_no_value_read_from_a_text_is_written_longer_than_its_bound(text: str, depth: int) -> None:
    data = ("[" * depth + text + "]" * depth).encode()
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError:  # (a float beyond the double range, a text nested too deep)
        return
    bound = written_size_bound(data)
    if depth > _WRITE_MAX_DEPTH:
        assert bound is None
    if bound is None:
        return
    for inner in _values(value):
        assert len(orjson.dumps(inner)) <= bound


def test_orjson_writes_no_deeper_than_the_codec_assumes() -> None:
    """Pins orjson's limits that `written_size_bound` relies on: if orjson changes them, this fails loudly."""
    assert orjson.dumps(orjson.loads(b"[" * _WRITE_MAX_DEPTH + b"]" * _WRITE_MAX_DEPTH))
    deep = b'{"a":' * (_WRITE_MAX_DEPTH + 1) + b"1" + b"}" * (_WRITE_MAX_DEPTH + 1)
    try:
        orjson.dumps(orjson.loads(deep))
    except TypeError:
        pass
    else:
        raise AssertionError("orjson now writes deeper values: _WRITE_MAX_DEPTH can grow")
    assert written_size_bound(deep) is None
    assert written_size_bound(b"[" * _WRITE_MAX_DEPTH + b"]" * _WRITE_MAX_DEPTH) is not None


def test_no_number_grows_beyond_the_codec_factor() -> None:
    """Every number text up to 4 characters long, and the longest floats orjson writes (24 bytes): a text of 5 or
    more characters grows less than the factor whatever it holds."""
    worst = 0.0
    for size in range(1, 5):
        for chars in itertools.product("0123456789-+.eE", repeat=size):
            text = "".join(chars).encode()
            try:
                value = orjson.loads(text)
            except orjson.JSONDecodeError:
                continue
            worst = max(worst, len(orjson.dumps(value)) / len(text))
    assert worst <= _GROWTH
    longest = [-struct.unpack("<d", struct.pack("<Q", bits))[0] for bits in (1, 0x000FFFFFFFFFFFFF, 0x7FEFFFFFFFFFFFFF)]
    longest += [-1.2345678901234567 * 10.0**exponent for exponent in range(-320, 308)]
    assert max(len(orjson.dumps(value)) for value in longest) == 24 < 5 * _GROWTH
