"""The exact codec the express paths use: orjson's speed, but no integer is ever rounded or refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interceptors import dumps_exact, loads_exact
from interceptors.codec import may_round_numbers

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(VALUES)
def test_any_json_value_round_trips_exactly(value: Any) -> None:
    encoded = dumps_exact(value)
    assert loads_exact(encoded) == value
    assert json.loads(encoded) == value  # and it is ordinary JSON


@given(st.integers(min_value=2**64, max_value=10**60) | st.integers(min_value=-(10**60), max_value=-(2**63) - 1))
def test_integers_beyond_64_bits_stay_integers(number: int) -> None:
    line = dumps_exact({"arguments": {"n": number}})
    assert may_round_numbers(line)
    assert loads_exact(line) == {"arguments": {"n": number}}


def test_the_slow_path_is_taken_only_for_long_digit_runs() -> None:
    assert not may_round_numbers(b'{"n": 922337203685477580, "s": "123456789012345678"}')
    assert may_round_numbers(b'{"s": "1234567890123456789"}')  # inside a string: harmless, merely slower


def test_non_json_is_refused_like_orjson_refuses_it() -> None:
    with pytest.raises(ValueError):
        loads_exact(b'{"n": 123456789012345678901, "x": NaN}')
    with pytest.raises(ValueError):
        loads_exact(b"{not json")
    with pytest.raises(TypeError):
        dumps_exact({1: "non-string key"})
