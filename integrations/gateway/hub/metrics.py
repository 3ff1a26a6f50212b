"""The gateway file's `/metrics`: one namespace, every server a `server` label (Prometheus text format).

Read at scrape time from the legs: whether each server is up, its restarts, and the requests its chain
passed or blocked, by method. Written here in the text format directly, so `/metrics` needs no extra
package; method labels are bounded (`MAX_METHODS` per server, then `other`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Final

from interceptors import Phase

MAX_METHODS: Final = 64
_METHOD: Final = re.compile(r"[A-Za-z0-9_./-]{1,64}")
NAMESPACE: Final = "mcp_interceptors"


class LegRequests:
    """Requests through one server's chain, by method and outcome (its request pass: passed or blocked)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self._methods: set[str] = set()

    def method(self, value: Any) -> str:
        if not isinstance(value, str) or not _METHOD.fullmatch(value):
            return "other"
        if value not in self._methods:
            if len(self._methods) >= MAX_METHODS:
                return "other"
            self._methods.add(value)
        return value

    def observe(self, adapter: Any) -> None:
        """Count every request pass `adapter` (a `ChainAdapter`) performs."""
        from ..router import ChainBlocked
        from ..router.channels import Channel

        run = adapter.run

        async def counted(action: Any) -> Any:
            outcome = await run(action)
            state = action.request
            if state is not None and action.phase == Phase.REQUEST and action.channel == Channel.REQUEST:
                self.counts[
                    (self.method(state.method), "blocked" if isinstance(outcome, ChainBlocked) else "passed")
                ] += 1
            return outcome

        adapter.run = counted


def exposition(legs: list[Any]) -> bytes:
    """Every family once, its samples for every server together."""
    up = [f'{NAMESPACE}_upstream_up{{server="{_label(leg.name)}"}} {int(leg.ready)}' for leg in legs]
    restarts = [
        f'{NAMESPACE}_upstream_restarts_total{{server="{_label(leg.name)}"}} {leg.health()["restarts"]}' for leg in legs
    ]
    requests = [
        f'{NAMESPACE}_requests_total{{server="{_label(leg.name)}",method="{method}",outcome="{outcome}"}} {count}'
        for leg in legs
        for (method, outcome), count in sorted(leg.requests.counts.items())
    ]
    lines = [
        f"# HELP {NAMESPACE}_upstream_up 1 when the server is ready.",
        f"# TYPE {NAMESPACE}_upstream_up gauge",
        *up,
        f"# HELP {NAMESPACE}_upstream_restarts_total Restarts of the server.",
        f"# TYPE {NAMESPACE}_upstream_restarts_total counter",
        *restarts,
        f"# HELP {NAMESPACE}_requests_total Requests by server, method and outcome (the chain's request pass).",
        f"# TYPE {NAMESPACE}_requests_total counter",
        *requests,
    ]
    return ("\n".join(lines) + "\n").encode()


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
