"""Output slots (`router/slots.py`): each stream releases its messages in the order they were decided on."""

from __future__ import annotations

import pytest

from integrations.gateway.router import SendDownstream
from integrations.gateway.router.slots import Streams

A, B = ("s", 1), ("s", None)

# (steps, what each step releases). A step: ("open", key, data or None, name) opens a slot (ready at once when it
# has data); ("fill", name, data or None) finishes a waiting slot (None: dropped) and flushes its stream.
CASES = [
    pytest.param([("open", A, b"1", "x")], [[b"1"]], id="a ready slot goes at once"),
    pytest.param(
        [("open", A, None, "x"), ("open", A, b"2", "y"), ("fill", "x", b"1")],
        [[], [], [b"1", b"2"]],
        id="a later ready slot waits for the one before it",
    ),
    pytest.param(
        [("open", A, None, "x"), ("open", A, None, "y"), ("fill", "y", b"2"), ("fill", "x", b"1")],
        [[], [], [], [b"1", b"2"]],
        id="filled out of order, released in order",
    ),
    pytest.param(
        [("open", A, None, "x"), ("open", A, b"2", "y"), ("fill", "x", None)],
        [[], [], [b"2"]],
        id="a dropped slot sends nothing and holds nothing back",
    ),
    pytest.param(
        [("open", A, None, "x"), ("open", B, b"b", "y"), ("fill", "x", b"a")],
        [[], [b"b"], [b"a"]],
        id="streams are independent",
    ),
]


@pytest.mark.parametrize(("steps", "released"), CASES)
def test_slots_release_in_order(steps: list[tuple[object, ...]], released: list[list[bytes]]) -> None:
    streams = Streams()
    slots = {}
    keys = {}
    for step, expected in zip(steps, released, strict=True):
        if step[0] == "open":
            _, key, data, name = step
            slots[name] = streams.open(key, data)  # type: ignore[arg-type]
            keys[name] = key
            out = streams.flush(key) if data is not None else []  # type: ignore[arg-type]
        else:
            _, name, data = step
            slot = slots[name]
            slot.data, slot.done = data, True  # type: ignore[assignment]
            out = streams.flush(keys[name])  # type: ignore[arg-type]
        assert [action.data for action in out if isinstance(action, SendDownstream)] == expected
    assert len(streams) == 0  # every stream emptied is removed


def test_a_released_message_names_its_session_request_and_whether_it_ends_it() -> None:
    streams = Streams()
    slot = streams.open(("s", 7), b"reply")
    slot.final, slot.outgoing = True, "gateway-1"
    (sent,) = streams.flush(("s", 7))
    assert sent == SendDownstream("s", b"reply", 7)
    assert isinstance(sent, SendDownstream) and sent.final and sent.outgoing == "gateway-1"


def test_a_session_that_leaves_takes_its_streams() -> None:
    streams = Streams()
    streams.open(("s", 1))
    streams.open(("t", 1))
    streams.drop_session("s")
    assert ("s", 1) not in streams and ("t", 1) in streams
    assert streams.flush(("s", 1)) == []
