"""Repeating warnings are one line per interval with the count held back (a stalled store, a client probing the
vault): the log keeps what happened without a line per call."""

from __future__ import annotations

import logging

import pytest

from interceptors.warn_every import WarnEvery


def test_one_line_per_interval_and_the_next_counts_the_rest(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    warnings = WarnEvery(logging.getLogger("test.warn_every"), "results withheld", every_s=10.0, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.warn_every"):
        assert warnings.warn("withheld %s", "one")
        assert [warnings.warn("withheld %s", "again") for _ in range(500)] == [False] * 500
        now[0] += 10.0
        assert warnings.warn("withheld %s", "later")
        now[0] += 10.0
        assert warnings.warn("withheld %s", "quiet")
    assert [r.getMessage() for r in caplog.records] == [
        "withheld one",
        "withheld later (and 500 more results withheld since the last warning)",
        "withheld quiet",
    ]
