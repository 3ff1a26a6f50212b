"""Shared resource subscriptions and listen filters (`router/subscriptions.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from integrations.gateway.router.subscriptions import Listen, Subscriptions, honor

# Steps (op, session, uri) and what each returns: hold -> first holder?, release -> last holder?
CASES = [
    pytest.param([("hold", "a", "r"), ("release", "a", "r")], [True, True], id="one holder: asked, then told"),
    pytest.param(
        [("hold", "a", "r"), ("hold", "b", "r"), ("release", "a", "r"), ("release", "b", "r")],
        [True, False, False, True],
        id="shared: asked once, told when the last lets go",
    ),
    pytest.param([("release", "a", "r")], [False], id="releasing what nobody holds tells nobody"),
    pytest.param([("hold", "a", "r"), ("release", "b", "r")], [True, False], id="releasing another's"),
    pytest.param([("hold", "a", "r"), ("hold", "a", "s")], [True, True], id="two resources, each its own"),
]


@pytest.mark.parametrize(("steps", "returns"), CASES)
def test_holding_and_releasing(steps: list[tuple[str, str, str]], returns: list[bool]) -> None:
    book = Subscriptions()
    for (op, session, uri), expected in zip(steps, returns, strict=True):
        got = book.hold(session, uri) if op == "hold" else book.release(session, uri)
        assert got is expected, (op, session, uri)


def test_what_a_session_holds_and_who_holds_a_resource() -> None:
    book = Subscriptions()
    book.hold("b", "r")
    book.hold("a", "r")
    assert book.holders("r") == ["a", "b"] and book.held("r") and not book.held("s") and not book.held(3)
    assert book.holds("a", "r") and not book.holds("a", "s")
    assert book.uris() == {"r"}
    assert book.session_closed("a") == ["r"]
    assert book.holders("r") == ["a", "b"]  # the router releases each returned resource
    assert book.release("a", "r") is False and book.release("b", "r") is True
    assert book.uris() == set()


def test_updates_wait_for_a_subscribe_still_in_its_chain() -> None:
    book = Subscriptions()
    assert book.defer("r", {"n": 1}, []) is False  # nobody waits: the router drops it
    book.wait("a", "r")
    book.wait("b", "r")
    assert book.defer("r", {"n": 1}, ["b"]) is True  # b holds it already and got it as a holder
    assert book.take("a", "r") == [{"n": 1}]
    assert book.take("b", "r") == []
    assert book.take("a", "r") == []


WANTED_ALL = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": ["u", 1, "u", "v"]}

HONOR_CASES: list[Any] = [
    pytest.param(
        WANTED_ALL,
        {"tools": {}, "resources": {"subscribe": True}},
        {"toolsListChanged": True, "resourceSubscriptions": ["u", "v"]},
        Listen(frozenset({"tools"}), frozenset({"u", "v"})),
        id="only what the upstream has, each URI once",
    ),
    pytest.param(
        WANTED_ALL,
        {"tools": {}, "prompts": {}, "resources": {}},
        {"toolsListChanged": True, "promptsListChanged": True},
        Listen(frozenset({"tools", "prompts"}), frozenset()),
        id="no subscriptions when the upstream cannot subscribe",
    ),
    pytest.param({"toolsListChanged": "yes"}, {"tools": {}}, {}, Listen(frozenset(), frozenset()), id="not true"),
]


@pytest.mark.parametrize(("wanted", "offered", "honored", "listen"), HONOR_CASES)
def test_a_listen_filter_is_honored_against_the_upstream(
    wanted: dict[str, Any], offered: dict[str, Any], honored: dict[str, Any], listen: Listen
) -> None:
    assert honor(wanted, offered) == (honored, listen)
