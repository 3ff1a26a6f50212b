"""Task ownership (`router/tasks.py`): who may reach a task, and what is forgotten when."""

from __future__ import annotations

import pytest

from integrations.gateway.router.tasks import MAX_TASK_PRINCIPALS, MAX_TASKS_PER_SESSION, TaskBook

# (who created t1: session, principal, modern), (who asks: session, principal, modern), whether it may reach t1
CASES = [
    pytest.param(("h1", "p", False), ("h1", "p", False), True, id="its own handshake session"),
    pytest.param(("h1", "p", False), ("h2", "p", False), False, id="another handshake session, same principal"),
    pytest.param(("h1", "p", False), ("m1", "p", True), False, id="a modern exchange, handshake task"),
    pytest.param(("m1", "p", True), ("m2", "p", True), True, id="a later modern exchange of its principal"),
    pytest.param(("m1", "p", True), ("m2", "q", True), False, id="a modern exchange of another principal"),
    pytest.param(("m1", "p", True), ("h1", "p", False), False, id="a handshake session of its principal"),
]


@pytest.mark.parametrize(("creator", "asker", "visible"), CASES)
def test_who_may_reach_a_task(creator: tuple[str, str, bool], asker: tuple[str, str, bool], visible: bool) -> None:
    book = TaskBook()
    session, principal, modern = creator
    book.remember("t1", session, principal, modern=modern, method="tools/call")
    asked_session, asked_principal, asked_modern = asker
    assert book.visible("t1", asked_session, asked_principal, modern=asked_modern) is visible
    assert not book.visible("unknown", session, principal, modern=modern)
    assert not book.visible(1, session, principal, modern=modern)  # not a task id at all


@pytest.mark.parametrize(
    ("modern", "kept_after_close"),
    [pytest.param(False, False, id="handshake: gone with its session"), pytest.param(True, True, id="modern: kept")],
)
def test_closing_a_session(modern: bool, kept_after_close: bool) -> None:
    book = TaskBook()
    book.remember("t1", "s", "p", modern=modern, method="tools/call")
    book.session_closed("s")
    owner = book.owner("t1")
    assert (owner is not None) is kept_after_close
    if owner is not None:
        assert owner.session is None and owner.method == "tools/call"  # no status has a session to go to
        assert book.visible("t1", "later", "p", modern=True)


def test_bounds_forget_the_oldest() -> None:
    book = TaskBook()
    for n in range(MAX_TASKS_PER_SESSION + 1):
        book.remember(f"h{n}", "s", "p", modern=False, method="tools/call")
    assert len(book) == MAX_TASKS_PER_SESSION and book.owner("h0") is None and book.owner("h1") is not None
    book.clear()
    for n in range(MAX_TASK_PRINCIPALS + 1):
        book.remember(f"m{n}", f"x{n}", n, modern=True, method="tools/call")
    assert len(book) == MAX_TASK_PRINCIPALS and book.owner("m0") is None
    book.clear()
    assert len(book) == 0
