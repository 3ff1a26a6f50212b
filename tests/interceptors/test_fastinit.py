"""`fast_init`: the descriptor-writing `__init__` builds the same object as the dataclass's own, still frozen."""

from __future__ import annotations

import dataclasses
from dataclasses import InitVar, dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from interceptors import InvocationContext, Principal, WireError
from interceptors._fastinit import fast_init


def _shape(decorate: Any) -> Any:
    @decorate
    @dataclass(frozen=True, slots=True)
    class Shape:
        a: int
        b: str = "x"
        c: list[int] = field(default_factory=list)
        d: int = field(default=5, init=False)
        e: tuple[int, ...] = field(default_factory=tuple, init=False)

        def __post_init__(self) -> None:
            if self.a < 0:
                raise ValueError("a must not be negative")

    return Shape


Plain = _shape(lambda cls: cls)
Fast = _shape(fast_init)


@given(a=st.integers(min_value=0), b=st.text(), c=st.lists(st.integers()), how=st.sampled_from(["pos", "kw", "few"]))
def test_the_same_fields_as_the_dataclass_init_for_any_arguments(a: int, b: str, c: list[int], how: str) -> None:
    def build(cls: Any) -> Any:
        if how == "pos":
            return cls(a, b, c)
        if how == "kw":
            return cls(c=c, a=a, b=b)
        return cls(a)

    plain, fast = build(Plain), build(Fast)
    assert dataclasses.asdict(fast) == dataclasses.asdict(plain)
    assert repr(fast).replace("Fast", "") == repr(plain).replace("Plain", "")
    assert fast == build(Fast) and hash(dataclasses.replace(fast, c=())) == hash(dataclasses.replace(fast, c=()))


def test_factories_run_per_instance_post_init_still_checks_and_the_instance_stays_frozen() -> None:
    first, second = Fast(1), Fast(1)
    assert first.c == [] and first.c is not second.c
    with pytest.raises(ValueError, match="negative"):
        Fast(-1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Fast()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Fast(1, "x", [], 4)  # type: ignore[call-arg]  # an init=False field is no parameter


def test_the_wire_types_keep_their_checks_and_defaults() -> None:
    with pytest.raises(WireError):
        Principal("robot")
    context = InvocationContext(Principal("user", "ann", {"roles": ["a"]}), "trace")
    assert context.timestamp.endswith("Z") and context.session_id is None
    assert InvocationContext.from_wire(context.to_wire()) == context


def test_what_it_cannot_copy_is_refused() -> None:
    @dataclass(slots=True)
    class Mutable:
        a: int

    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        seed: InitVar[int] = 0

    @dataclass(frozen=True, slots=True, kw_only=True)
    class KeywordOnly:
        a: int

    for cls in (Mutable, WithInitVar, KeywordOnly):
        with pytest.raises(TypeError):
            fast_init(cls)
