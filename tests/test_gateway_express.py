"""The gateway's express route, end to end: `mcp-interceptors proxy` as a real subprocess spoken to in raw
JSON-RPC lines, in front of real upstream servers (tests/servers/plain_upstream.py: no logging capability,
so the lane serves 2025-era clients too; a `whoami` tool reports the request id the upstream received).

The express path must be invisible: the same requests get the same replies, byte for byte once parsed,
with the lane on and with `MCP_INTERCEPTORS_EXPRESS=off` (every request through the SDK). Every wait is
bounded and every process is waited for.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrations.gateway_express import INVALID_RESULT_MESSAGE
from integrations.gateway_upstream import UPSTREAM_CLOSED_MESSAGE
from interceptors import INTERNAL_ERROR
from tests.conftest import ROOT
from tests.processes import children
from tests.servers.plain_upstream import FAIL_CODE

PLAIN = [sys.executable, "-m", "tests.servers.plain_upstream"]
EXPRESS_ENV = "MCP_INTERCEPTORS_EXPRESS"
MODERN = "2026-07-28"
ERAS = [MODERN, "2025-11-25", "2025-03-26"]
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
ENVELOPE: dict[str, Any] = {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, INFO_KEY: {"name": "t", "version": "0"}}
STEP_S = 60.0  # a wait, never a claim: generous, so a busy machine cannot fail a step
"""Bound for any single wait (a start, a reply): generous, only ever hit by a hang."""


class Proxy:
    """One gateway child; a thread reads its stdout into a queue, another keeps its stderr."""

    def __init__(
        self,
        *,
        express: bool = True,
        policy: str = "none",
        upstream: Sequence[str] = PLAIN,
        env: Mapping[str, str] | None = None,
    ) -> None:
        environment = {key: value for key, value in os.environ.items() if key != EXPRESS_ENV}
        if not express:
            environment[EXPRESS_ENV] = "off"
        environment.update(env or {})
        argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", policy, "--", *upstream]
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=environment, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []  # everything collected so far, in order
        self.stderr: list[str] = []
        self.ids = itertools.count(1)
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.inbox.put(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def send(self, *messages: Mapping[str, Any]) -> None:
        """All `messages` in one write."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"".join(json.dumps(message).encode() + b"\n" for message in messages))
        self.process.stdin.flush()

    def collect(self, ids: Sequence[Any], timeout: float = STEP_S) -> list[dict[str, Any]]:
        """Messages in arrival order until every id in `ids` has a reply (ints and strings kept apart)."""
        wanted = {_key(request_id) for request_id in ids}
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while wanted:
            try:
                message = self.inbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no reply for {sorted(wanted)} in {timeout:g} s; got {got}") from None
            got.append(message)
            self.seen.append(message)
            if "method" not in message:
                wanted.discard(_key(message.get("id")))
        return got

    def exchange(self, message: Mapping[str, Any], timeout: float = STEP_S) -> list[dict[str, Any]]:
        self.send(message)
        return self.collect([message["id"]], timeout)

    def call(self, message: Mapping[str, Any], timeout: float = STEP_S) -> dict[str, Any]:
        """The reply to one request (nothing else may arrive meanwhile)."""
        (reply,) = self.exchange(message, timeout)
        return reply

    def open(self, era: str) -> None:
        """server/discover with the envelope (2026-07-28), or initialize + notifications/initialized."""
        if era == MODERN:
            opening = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": ENVELOPE}}
            assert "result" in self.call(opening)
            return
        info = {"name": "t", "version": "0"}
        params = {"protocolVersion": era, "capabilities": {}, "clientInfo": info}
        assert "result" in self.call({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def tool(self, era: str, name: str, arguments: Mapping[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
        """A tools/call request with a fresh int id."""
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return request(next(self.ids), "tools/call", with_meta(era, params, meta))

    def upstream_id(self, era: str) -> Any:
        """The JSON-RPC id the upstream saw for a call: "x<n>" on the express path, an int through the SDK."""
        reply = self.call(self.tool(era, "whoami"))
        return reply["result"]["structuredContent"]["id"]

    def upstream_pids(self) -> list[int]:
        return list(children(self.process.pid))

    def close(self) -> int:
        """Close stdin and reap (killed if it lingers); the exit status."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            return self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            raise AssertionError("the gateway did not exit when its client left") from None


def _key(request_id: Any) -> tuple[str, Any]:
    return (type(request_id).__name__, request_id)


def request(request_id: Any, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = dict(params)
    return message


def with_meta(era: str, params: Mapping[str, Any], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`params` with the era's `_meta`: the envelope at 2026-07-28 (plus `extra`), only `extra` before."""
    meta = {**(ENVELOPE if era == MODERN else {}), **(extra or {})}
    return {**params, "_meta": meta} if meta else dict(params)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


def wait_gone(pids: Sequence[int], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"still running: {[pid for pid in pids if alive(pid)]}"
        time.sleep(0.05)


def assert_no_zombies() -> None:
    assert not [pid for pid, state in children().items() if state == "Z"]


@pytest.fixture
def proxies() -> Iterator[list[Proxy]]:
    """Gateways a test starts (append to the list); all closed and reaped afterwards, upstreams included."""
    started: list[Proxy] = []
    yield started
    upstreams = [pid for proxy in started for pid in proxy.upstream_pids()]
    for proxy in started:
        proxy.close()
    wait_gone(upstreams)
    assert_no_zombies()


# 1. Same replies with the lane on and off ---------------------------------------------------------------
def differential_cases(era: str) -> list[dict[str, Any]]:
    """Requests for every outcome the route forwards, and for everything it must leave to the SDK."""
    echo = {"name": "echo", "arguments": {"text": "hello"}}
    complete = {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "al"}}
    cases = [
        request(1, "tools/call", with_meta(era, echo)),
        request("two", "tools/call", with_meta(era, {"name": "echo", "arguments": {"text": "string id"}})),
        request(-3, "tools/call", with_meta(era, echo)),
        request(2**53, "tools/call", with_meta(era, echo)),
        request("", "tools/call", with_meta(era, echo)),
        request(4, "tools/call", with_meta(era, {"name": "no-such-tool"})),
        request(5, "tools/call", with_meta(era, {"name": "fail", "arguments": {"text": "bad"}})),
        request(6, "tools/call", with_meta(era, {"name": "soft", "arguments": {"text": "meh"}})),
        request(7, "tools/call", with_meta(era, {"name": "invalid"})),
        request(8, "prompts/get", with_meta(era, {"name": "greet", "arguments": {"name": "Ada"}})),
        request(9, "prompts/get", with_meta(era, {"name": "no-such-prompt"})),
        request(10, "prompts/get", with_meta(era, {})),  # no name
        request(11, "completion/complete", with_meta(era, complete)),
        request(12, "completion/complete", with_meta(era, {**complete, "ref": {"type": "ref/nope"}})),
        # Progress and log opt-ins take the SDK path: progress notifications arrive before the result.
        request(
            13, "tools/call", with_meta(era, {"name": "progress", "arguments": {"text": "p"}}, {"progressToken": 13})
        ),
        request("p14", "tools/call", with_meta(era, {"name": "progress"}, {"progressToken": "tok"})),
        request(15, "tools/call", with_meta(era, echo, {LOG_LEVEL_KEY: "debug"})),
        request(16, "tools/call", with_meta(era, echo, {"traceparent": "00-abc", "vendor/x": [1]})),
        # Malformed requests: the SDK's errors either way.
        request(17, "tools/call", with_meta(era, {"arguments": {}})),  # no name
        request(18, "tools/call", with_meta(era, {"name": 5})),
        request(19, "tools/call", with_meta(era, {"name": "echo", "arguments": [1, 2]})),
        request(20, "tools/call", with_meta(era, {"name": "echo", "arguments": "text"})),
        request(21, "tools/call"),  # no params at all
    ]
    if era == MODERN:
        cases += [
            request(30, "tools/call", {**echo, "_meta": {**ENVELOPE, VERSION_KEY: "2099-01-01"}}),
            request(31, "tools/call", {**echo, "_meta": {**ENVELOPE, VERSION_KEY: "2025-11-25"}}),
            request(32, "tools/call", echo),  # no envelope
            request(33, "tools/call", {**echo, "_meta": {VERSION_KEY: MODERN}}),  # incomplete envelope
            request(34, "tools/call", {**echo, "_meta": {**ENVELOPE, INFO_KEY: {"name": 5}}}),
            request(35, "tools/call", {**echo, "_meta": {**ENVELOPE, CAPABILITIES_KEY: "none"}}),
            request(36, "tools/call", {**echo, "_meta": {**ENVELOPE, CAPABILITIES_KEY: {"sampling": 5}}}),
            request(37, "tools/call", {**echo, "_meta": {key: v for key, v in ENVELOPE.items() if key != INFO_KEY}}),
        ]
    else:
        cases.append(request(40, "tools/call", {**echo, "_meta": ENVELOPE}))  # the 2026 envelope on a 2025 wire
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("era", ERAS)
def test_express_replies_equal_the_sdk_paths(proxies: list[Proxy], era: str) -> None:
    on, off = Proxy(), Proxy(express=False)
    proxies += [on, off]
    on.open(era)
    off.open(era)
    for case in differential_cases(era):
        on.send(case)
        off.send(case)
        expected = off.collect([case["id"]])
        assert on.collect([case["id"]]) == expected, case

    # The comparison was worth something: the answers are what the upstream said, shaped for the era.
    replies = {_key(message.get("id")): message for message in off.seen if "method" not in message}
    echoed = replies[_key(1)]["result"]
    assert (echoed["content"], echoed["structuredContent"]) == ([{"type": "text", "text": "hello"}], {"text": "hello"})
    assert ("resultType" in echoed) == (era == MODERN)
    assert replies[_key(5)]["error"] == {
        "code": FAIL_CODE,
        "message": "failed with bad",
        "data": {"detail": "bad", "list": [1, 2]},
    }
    assert replies[_key(6)]["result"]["isError"] is True
    assert replies[_key(7)]["error"] == {"code": INTERNAL_ERROR, "message": INVALID_RESULT_MESSAGE}
    assert replies[_key(11)]["result"]["completion"]["values"] == ["alice", "albert"]
    progress = [m for m in off.seen if m.get("method") == "notifications/progress"]
    assert [m["params"]["progressToken"] for m in progress] == [13, 13, 13, "tok", "tok", "tok"]

    # And the lane really served the one side: the upstream saw an express id there, an SDK id here.
    express_id, sdk_id = on.upstream_id(era), off.upstream_id(era)
    assert isinstance(express_id, str) and express_id.startswith("x")
    assert isinstance(sdk_id, int)

    # A result that is not even an object: -32603 both ways (the pipe answers the session's waiter for it).
    nonobject = on.call(on.tool(era, "nonobject"))
    assert nonobject["error"] == {
        "code": INTERNAL_ERROR,
        "message": "the upstream server sent a malformed reply: its result is a string, not an object",
    }
    assert off.call(off.tool(era, "nonobject"))["error"] == nonobject["error"]


# 2. The lane engages only when nothing would be skipped ----------------------------------------------------
@pytest.mark.slow
def test_the_lane_stays_off_when_interceptors_or_upstream_logs_are_involved(proxies: list[Proxy]) -> None:
    logging_upstream = {"PLAIN_UPSTREAM_LOGGING": "1"}
    cases = [  # (gateway, era, whether the upstream sees an express id)
        (Proxy(policy="standard"), MODERN, False),  # the standard policy hooks tools/call: the chain runs
        (Proxy(policy="standard"), "2025-11-25", False),
        (Proxy(env=logging_upstream), "2025-11-25", False),  # its logs would race the result: the SDK orders them
        (Proxy(env=logging_upstream), MODERN, True),  # a 2026 client opts in to logs per request
    ]
    proxies += [proxy for proxy, _, _ in cases]
    for proxy, era, express in cases:
        proxy.open(era)
        seen = proxy.upstream_id(era)
        if express:
            assert isinstance(seen, str) and seen.startswith("x"), (era, seen)
        else:
            assert isinstance(seen, int), (era, seen)


# 3. The upstream going away mid-call -----------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("era", [MODERN, "2025-11-25"])
def test_upstream_crash_mid_express_call_is_an_error_and_the_gateway_exits(proxies: list[Proxy], era: str) -> None:
    proxy = Proxy()
    proxies.append(proxy)
    proxy.open(era)
    assert str(proxy.upstream_id(era)).startswith("x")
    upstream = proxy.upstream_pids()
    assert len(upstream) == 1
    crash = proxy.tool(era, "crash")
    started = time.monotonic()
    (reply,) = proxy.exchange(crash, timeout=10)
    assert time.monotonic() - started < 10  # at once, not at a read timeout
    assert reply == {
        "jsonrpc": "2.0",
        "id": crash["id"],
        "error": {"code": INTERNAL_ERROR, "message": UPSTREAM_CLOSED_MESSAGE},
    }
    assert proxy.process.wait(timeout=30) == 1
    wait_gone(upstream)
    assert any(UPSTREAM_CLOSED_MESSAGE in line for line in proxy.stderr)


# 4. Cancellation -------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("era", [MODERN, "2025-11-25"])
def test_a_cancelled_express_call_is_never_answered_and_the_upstream_sees_the_cancel(
    proxies: list[Proxy], era: str
) -> None:
    proxy = Proxy()
    proxies.append(proxy)
    proxy.open(era)
    assert str(proxy.upstream_id(era)).startswith("x")

    def stats() -> dict[str, int]:
        result: dict[str, int] = proxy.call(proxy.tool(era, "stats"))["result"]["structuredContent"]
        return result

    proxy.send(request("slow", "tools/call", with_meta(era, {"name": "sleep", "arguments": {"seconds": 30}})))
    deadline = time.monotonic() + 5
    while stats()["running"] == 0:  # the call has reached the upstream's handler
        assert time.monotonic() < deadline
        time.sleep(0.02)
    proxy.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})
    deadline = time.monotonic() + 5
    while stats() != {"running": 0, "cancelled": 1}:  # the gateway cancelled it upstream
        assert time.monotonic() < deadline
        time.sleep(0.02)
    echoed = proxy.call(proxy.tool(era, "echo", {"text": "still here"}))
    assert echoed["result"]["structuredContent"] == {"text": "still here"}
    time.sleep(0.2)
    assert proxy.inbox.empty()
    assert not [message for message in proxy.seen if message.get("id") == "slow"]
    assert proxy.close() == 0


# 5. Concurrent calls in one write ---------------------------------------------------------------------------
@pytest.fixture(scope="module", params=[MODERN, "2025-11-25"])
def shared(request: pytest.FixtureRequest) -> Iterator[tuple[Proxy, str]]:
    era: str = request.param
    proxy = Proxy()
    try:
        proxy.open(era)
        assert str(proxy.upstream_id(era)).startswith("x")
        yield proxy, era
    finally:
        upstream = proxy.upstream_pids()
        assert proxy.close() == 0
        wait_gone(upstream)


REQUEST_IDS = st.integers(-(2**53), 2**53) | st.text(max_size=12)
CALLS = st.lists(
    st.tuples(REQUEST_IDS, st.text(max_size=40), st.booleans()),
    min_size=1,
    max_size=20,
    unique_by=lambda call: _key(call[0]),
)
SENTINELS = itertools.count()


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(calls=CALLS)
def test_concurrent_calls_in_one_write_each_get_their_own_reply(
    shared: tuple[Proxy, str], calls: list[tuple[int | str, str, bool]]
) -> None:
    """Some calls carry a progress token (the SDK path), the rest take the lane: all interleaved."""
    proxy, era = shared
    messages = []
    for request_id, text, via_sdk in calls:
        extra = {"progressToken": f"tok-{request_id}"} if via_sdk else None
        messages.append(
            request(request_id, "tools/call", with_meta(era, {"name": "echo", "arguments": {"text": text}}, extra))
        )
    proxy.send(*messages)
    got = proxy.collect([request_id for request_id, _, _ in calls])
    sentinel = f"sentinel-ping-{next(SENTINELS)}"  # longer than any generated id
    got += proxy.exchange(request(sentinel, "ping", with_meta(era, {})))
    replies = [message for message in got if "method" not in message and message.get("id") != sentinel]
    assert sorted(map(_key, (reply["id"] for reply in replies))) == sorted(_key(call[0]) for call in calls)
    texts = {_key(request_id): text for request_id, text, _ in calls}
    for reply in replies:
        assert reply["result"]["structuredContent"] == {"text": texts[_key(reply["id"])]}, reply
