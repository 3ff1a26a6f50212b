"""The server-side express lane (`interceptors_server/express.py`) answers as the SDK would.

Real `serve_stdio` processes spoken to in raw JSON lines: one with the lane, one where a pass-through
middleware leaves every request to the SDK (`tests/servers/express_host.py --sdk`). The same transcript
must come back from both, byte for byte but for the measured `durationMs`.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.server.caching import CacheHint
from mcp.server.lowlevel.server import Server

from interceptors_server.express import ExpressLane, express_lane_for
from interceptors_server.serving import build_server
from tests.conftest import ROOT
from tests.servers.express_host import PassThrough, registry

MODERN = "2026-07-28"
ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "express-test", "version": "0"},
}
PAYLOAD = {"name": "echo", "arguments": {"text": "hi"}}
CONNECTION_CLOSED = -32000


class Served:
    """One `express_host` child; a thread reads its replies so a silent server cannot hang the test."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.servers.express_host", *args],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.transcript: list[dict[str, Any]] = []
        self.lane_answered: list[str] = []  # names of the invokes the lane answered, from the child's stderr
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)  # EOF

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            if line.startswith(b"lane "):
                self.lane_answered.append(line[5:].decode().strip())

    def lane_count(self) -> int:
        """How many invokes the lane answered so far (each logged before its reply was written)."""
        time.sleep(0.1)  # the lines are in the pipe already: let the reader thread catch up
        return len(self.lane_answered)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def next_reply(self, timeout: float) -> dict[str, Any] | None:
        """The next line as JSON (recorded in the transcript); None at EOF or when nothing came in time."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            self.lines.put(None)  # stays at EOF
            return None
        reply: dict[str, Any] = json.loads(line)
        self.transcript.append(reply)
        return reply

    def reply_to(self, request_id: Any, timeout: float = 60) -> dict[str, Any]:  # a busy machine starts slowly
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            reply = self.next_reply(left)
            if reply is None:
                break
            if reply.get("id") == request_id:
                return reply
        raise AssertionError(f"no reply to request {request_id!r}")

    def exchange(self, message: dict[str, Any]) -> None:
        """Send; wait for the reply if it is a request (notifications and null ids are not answered)."""
        self.send(message)
        if message.get("id") is not None:
            self.reply_to(message["id"])

    def close_stdin(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()

    def close(self) -> None:
        self.close_stdin()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@pytest.fixture
def lane() -> Iterator[Served]:
    child = Served()
    yield child
    child.close()


@pytest.fixture
def sdk() -> Iterator[Served]:
    child = Served("--sdk")
    yield child
    child.close()


def request(request_id: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def invoke(request_id: Any, meta: Any = ENVELOPE, **params: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"event": "tools/call", "phase": "request", "payload": PAYLOAD, **params}
    if meta is not None:
        body["_meta"] = meta
    return request(request_id, "interceptor/invoke", body)


def cancelled(request_id: Any) -> dict[str, Any]:
    params = {"requestId": request_id, "reason": "test"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def discover(request_id: Any = 0, meta: dict[str, Any] = ENVELOPE) -> dict[str, Any]:
    return request(request_id, "server/discover", {"_meta": meta})


def without_durations(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_durations(item) for key, item in value.items() if key != "durationMs"}
    if isinstance(value, list):
        return [without_durations(item) for item in value]
    return value


def modern_cases(meta: Any) -> list[dict[str, Any]]:
    """Invokes for every answer the host gives, plus envelopes and ids the lane must leave to the SDK."""
    return [
        invoke(1, meta, name="express/allow"),
        invoke("str-id", meta, name="express/allow", phase="response"),
        invoke(2, meta, name="express/deny"),
        invoke(3, meta, name="express/upper"),
        invoke(4, meta, name="nope/unknown"),
        invoke(5, meta),  # no name
        invoke(6, meta, name="express/allow", event=None),
        invoke(7, meta, name="express/allow", phase="sideways"),
        invoke(8, meta, name="express/allow", timeoutMs=-1),
        invoke(9, meta, name=42),
        request(10, "interceptor/invoke", {"_meta": meta} if meta is not None else None),
        invoke(11, meta, name="express/deny", phase="response"),  # a phase it does not hook
        invoke(12, meta, name="express/allow", event="resources/read"),  # an event it does not hook
        invoke(13, meta, name="express/raise"),
        invoke(14, meta, name="express/slow", payload={"sleep": 5}, timeoutMs=100),
        invoke(15, meta, name="express/allow", config={"any": "thing"}, context={"k": [1, 2]}),
        invoke(16, meta, name="express/allow", payload={"big": 2**62, "f": 1.5, "s": "ü\u2028"}),
        invoke(17, meta, name="express/allow", extra="ignored by the host"),
        {"jsonrpc": "2.0", "id": None, **{k: v for k, v in invoke(0, meta, name="express/allow").items() if k != "id"}},
        request(18, "interceptors/list", {"_meta": meta} if meta is not None else None),
    ]


def envelope_cases() -> list[dict[str, Any]]:
    """2026-era envelopes the lane must refuse to take: the SDK names what is wrong."""
    return [
        invoke(100, {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}, name="express/allow"),
        invoke(101, {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": 2026}, name="express/allow"),
        invoke(102, {"io.modelcontextprotocol/protocolVersion": MODERN}, name="express/allow"),
        invoke(103, None, name="express/allow"),
        invoke(104, [ENVELOPE], name="express/allow"),
        invoke(105, {**ENVELOPE, "progressToken": [1]}, name="express/allow"),
        invoke(106, {**ENVELOPE, "progressToken": "tok"}, name="express/allow"),
        invoke(107, {**ENVELOPE, "progressToken": 7}, name="express/allow"),
        invoke(108, {**ENVELOPE, "io.modelcontextprotocol/clientInfo": 5}, name="express/allow"),
        invoke(109, {**ENVELOPE, "io.modelcontextprotocol/clientCapabilities": []}, name="express/allow"),
        legacy_opening()[0] | {"id": 110},  # initialize on a 2026 connection: refused
        invoke(111, ENVELOPE, name="express/allow"),  # after any initialize the lane leaves all to the SDK
    ]


def legacy_opening() -> list[dict[str, Any]]:
    initialize = request(0, "initialize", {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "legacy", "version": "0"},
    })  # fmt: skip
    return [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def transcripts(lane: Served, sdk: Served, messages: list[dict[str, Any]], lane_answers: int) -> None:
    """Both children get `messages` one by one; their transcripts must be identical, and the lane must
    have answered `lane_answers` invokes (the `--sdk` child none): proof the lane really took them."""
    for message in messages:
        lane.exchange(message)
        sdk.exchange(message)
    for child in (lane, sdk):  # a final request flushes out any stray reply (to a null id, say)
        child.exchange(request("end", "ping", {"_meta": ENVELOPE} if messages[0]["method"] != "initialize" else None))
    assert without_durations(lane.transcript) == without_durations(sdk.transcript)
    assert (lane.lane_count(), sdk.lane_count()) == (lane_answers, 0), lane.lane_answered


def test_a_2026_connection_gets_the_sdks_replies_from_the_lane(lane: Served, sdk: Served) -> None:
    # The lane answers every invoke with an acceptable envelope: all of `modern_cases` but the null id, the
    # list, and #16 (a 19-digit number: the SDK's), then #106-#109 (the envelopes the SDK accepts too).
    transcripts(lane, sdk, [discover(), *modern_cases(ENVELOPE), *envelope_cases()], lane_answers=17 + 4)
    replies = {reply["id"]: reply for reply in lane.transcript}
    # The lane really answered: each answer it gives exactly as the SDK would, and the cases are what they say.
    assert replies[1]["result"]["valid"] is True and replies[1]["result"]["resultType"] == "complete"
    assert replies[1]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "express-host"
    assert replies[2]["result"]["valid"] is False
    assert replies[3]["result"]["modified"] is True and replies[3]["result"]["payload"]["name"] == "ECHO"
    assert replies[4]["error"]["code"] == -32602
    assert replies[13]["error"]["data"]["reason"] == "handler raised RuntimeError"
    assert "secret" not in json.dumps(replies[13])
    assert replies[14]["error"]["data"]["reason"] == "timeout"
    assert replies[16]["result"]["info"]["seen"]["big"] == 2**62
    assert replies[100]["error"]["code"] == -32022
    assert replies[102]["error"]["code"] == -32602
    assert replies[105]["error"]["code"] == -32602
    assert replies[106]["result"]["valid"] is True
    assert replies[110]["error"]["code"] == -32022
    assert None not in replies, "a null id is a notification: never answered"


def test_integers_beyond_64_bits_and_long_digit_runs_match_the_sdk(lane: Served, sdk: Served) -> None:
    transcripts(lane, sdk, [
        discover(),
        invoke(1, ENVELOPE, name="express/allow", payload={"huge": 2**70, "neg": -(2**65)}),
        invoke(2, ENVELOPE, name="express/allow", payload={"text": "12345678901234567890123"}),
        invoke(3, ENVELOPE, name="express/allow", payload={"n": 1234567890123456789}),
    ], lane_answers=0)  # fmt: skip
    huge, digits, exact = lane.transcript[1:4]
    assert huge["error"]["data"] == {"field": "payload"}  # the host refuses what it cannot encode, on both paths
    assert digits["result"]["info"]["seen"] == {"text": "12345678901234567890123"}
    assert exact["result"]["info"]["seen"] == {"n": 1234567890123456789}


def test_the_opening_request_decides_the_era_even_with_a_long_digit_run(lane: Served, sdk: Served) -> None:
    """A 2026 opening the lane cannot read exactly must still open the 2026 era for it: a later
    `initialize` + `initialized` must not make the lane answer envelope-less invokes the SDK refuses."""
    long_run = {**ENVELOPE, "io.modelcontextprotocol/clientInfo": {"name": "n", "version": "1" * 25}}
    transcripts(lane, sdk, [
        discover(0, long_run),
        *legacy_opening(),
        invoke(1, None, name="express/allow"),
        invoke(2, ENVELOPE, name="express/allow"),
    ], lane_answers=0)  # fmt: skip
    assert "error" in lane.transcript[-3] and lane.transcript[-3]["id"] == 1


def test_a_2025_opening_with_a_long_digit_run_keeps_2026_invokes_off_the_lane(lane: Served, sdk: Served) -> None:
    initialize, initialized = legacy_opening()
    initialize["params"]["clientInfo"]["version"] = "9" * 20
    transcripts(lane, sdk, [
        initialize,
        initialized,
        invoke(1, ENVELOPE, name="express/allow"),
        invoke(2, ENVELOPE, name="express/allow"),
        invoke(3, None, name="express/allow"),
    ], lane_answers=1)  # fmt: skip
    assert lane.transcript[2]["error"]["code"] == -32600


def test_a_2025_connection_gets_the_sdks_replies_from_the_lane(lane: Served, sdk: Served) -> None:
    second_initialize = legacy_opening()[0] | {"id": 200}
    # The lane: `modern_cases(None)` but #10 (no params), #16 (a 19-digit number), the null id and the list;
    # the same with a progressToken, #10 included; nothing after the second initialize.
    transcripts(lane, sdk, [
        *legacy_opening(),
        *modern_cases(None),
        *modern_cases({"progressToken": "p"}),
        invoke(150, {"progressToken": [1]}, name="express/allow"),
        invoke(151, ENVELOPE, name="express/allow"),  # the 2026 envelope on a 2025 connection
        second_initialize,
        invoke(201, None, name="express/allow"),
    ], lane_answers=16 + 17)  # fmt: skip
    replies = {reply["id"]: reply for reply in lane.transcript}
    assert replies[1]["result"]["valid"] is True and "resultType" not in replies[1]["result"]
    assert replies[151]["error"]["code"] == -32600


def test_requests_before_initialized_match_the_sdk(lane: Served, sdk: Served) -> None:
    initialize, initialized = legacy_opening()
    transcripts(lane, sdk, [initialize, invoke(1, None, name="express/allow"), initialized,
                            invoke(2, None, name="express/allow")], lane_answers=1)  # fmt: skip


def slow_then(child: Served, then: list[dict[str, Any]]) -> None:
    child.exchange(discover())
    child.send(invoke("slow", ENVELOPE, name="express/slow", payload={"sleep": 1.0}))
    time.sleep(0.2)  # it is running
    for message in then:
        child.send(message)


@pytest.mark.parametrize("mode", ["lane", "sdk"])
def test_a_cancelled_invoke_is_never_answered_and_the_server_keeps_answering(mode: str) -> None:
    child = Served() if mode == "lane" else Served("--sdk")
    try:
        started = time.monotonic()
        slow_then(child, [cancelled("slow"), invoke("after", ENVELOPE, name="express/allow")])
        assert child.reply_to("after", timeout=30)["result"]["valid"] is True
        while (left := started + 1.7 - time.monotonic()) > 0:  # past the moment the handler would have answered
            if child.next_reply(left) is None and child.process.poll() is not None:
                break
        assert all(reply["id"] != "slow" for reply in child.transcript), child.transcript
        child.exchange(invoke("later", ENVELOPE, name="express/allow"))
        assert child.lane_count() == (3 if mode == "lane" else 0)
    finally:
        child.close()


@pytest.mark.parametrize("mode", ["lane", "sdk"])
def test_shutdown_answers_in_flight_invokes_connection_closed_and_exits(mode: str) -> None:
    child = Served() if mode == "lane" else Served("--sdk")
    try:
        slow_then(child, [])
        child.send(invoke("quick", ENVELOPE, name="express/allow"))
        assert child.reply_to("quick")["result"]["valid"] is True
        assert child.lane_count() == (2 if mode == "lane" else 0)
        closed_at = time.monotonic()
        child.close_stdin()
        reply = child.reply_to("slow", timeout=20)
        assert reply["error"]["code"] == CONNECTION_CLOSED, reply
        child.process.wait(timeout=20)
        assert time.monotonic() - closed_at < 20, "the server must exit promptly once stdin closes"
        assert child.process.returncode == 0
    finally:
        child.close()


def test_a_duplicate_id_in_flight_is_answered_as_the_sdk_answers_it(lane: Served, sdk: Served) -> None:
    """The lane leaves a request whose id it has in flight to the SDK: both get answered, as without the lane."""
    for child in (lane, sdk):
        child.exchange(discover())
        child.send(invoke("dup", ENVELOPE, name="express/slow", payload={"sleep": 0.5}))
        child.send(invoke("dup", ENVELOPE, name="express/allow"))
    for child in (lane, sdk):
        child.reply_to("dup")
        child.reply_to("dup")
    assert without_durations(lane.transcript) == without_durations(sdk.transcript)
    assert [reply["result"]["interceptor"] for reply in lane.transcript[1:]] == ["express/allow", "express/slow"]
    assert lane.lane_answered == ["express/slow"], "the second `dup` is the SDK's"


def test_cancelling_an_unknown_or_finished_request_is_harmless(lane: Served) -> None:
    lane.exchange(discover())
    lane.exchange(invoke(1, ENVELOPE, name="express/allow"))
    lane.send(cancelled(1))
    lane.send(cancelled("never-sent"))
    lane.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}})
    lane.exchange(invoke(2, ENVELOPE, name="express/allow"))
    assert [reply["id"] for reply in lane.transcript] == [0, 1, 2]


def test_concurrent_invokes_each_get_their_own_reply(lane: Served) -> None:
    lane.exchange(discover())
    ids: list[int | str] = [*range(1, 40), *(f"s{n}" for n in range(40))]
    for request_id in ids:
        lane.send(invoke(request_id, ENVELOPE, name="express/allow", payload={"id": request_id}))
    deadline = time.monotonic() + 10
    while len(lane.transcript) < len(ids) + 1 and (left := deadline - time.monotonic()) > 0:
        lane.next_reply(left)
    replies = {reply["id"]: reply for reply in lane.transcript if reply["id"] != 0}
    assert len(replies) == len(lane.transcript) - 1, "one reply per request"
    assert sorted(map(str, replies)) == sorted(map(str, ids))
    assert all(reply["result"]["info"]["seen"] == {"id": key} for key, reply in replies.items())
    assert lane.lane_count() == len(ids)


def test_no_lane_when_the_server_runs_middleware() -> None:
    async def write(data: bytes) -> None:
        return None

    server: Server[Any] = build_server([registry])
    assert isinstance(express_lane_for(server, write), ExpressLane)
    server.middleware.append(PassThrough())
    assert express_lane_for(server, write) is None


def test_no_lane_without_interceptors_with_a_cache_hint_or_when_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    async def write(data: bytes) -> None:
        return None

    assert express_lane_for(Server("plain"), write) is None
    hinted: Server[Any] = build_server([registry])
    hinted.cache_hints["interceptor/invoke"] = CacheHint()
    assert express_lane_for(hinted, write) is None
    monkeypatch.setenv("MCP_INTERCEPTORS_EXPRESS", "off")
    assert express_lane_for(build_server([registry]), write) is None


# Differential fuzz: arbitrary invoke params and envelopes get the same reply from the lane and the SDK.
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)  # fmt: skip
METAS = st.one_of(
    st.just(ENVELOPE),
    st.builds(lambda token: {**ENVELOPE, "progressToken": token}, JSON),
    st.builds(lambda version: {**ENVELOPE, "io.modelcontextprotocol/protocolVersion": version},
              st.sampled_from(["2025-11-25", "2026-07-28", "", "2099-01-01"]) | JSON),
    st.builds(lambda key: {k: v for k, v in ENVELOPE.items() if k != key}, st.sampled_from(sorted(ENVELOPE))),
    st.builds(lambda info, caps: {**ENVELOPE, "io.modelcontextprotocol/clientInfo": info,
                                  "io.modelcontextprotocol/clientCapabilities": caps}, JSON, JSON),
    JSON,
)  # fmt: skip
INVOKE_PARAMS = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["express/allow", "express/deny", "express/upper", "express/raise", "nope"]),
        "event": st.sampled_from(["tools/call", "*", "tools/*", "resources/read"]) | st.text(max_size=10),
        "phase": st.sampled_from(["request", "response", "both"]) | JSON,
        "payload": JSON,
    },
    optional={"timeoutMs": st.integers(-5, 5000) | JSON, "config": JSON, "context": JSON, "extra": JSON},
)


@pytest.fixture(scope="module", params=["2025", "2026"])
def pair(request: pytest.FixtureRequest) -> Iterator[tuple[Served, Served]]:
    children = Served(), Served("--sdk")
    opening = [discover()] if request.param == "2026" else legacy_opening()
    for child in children:
        for message in opening:
            child.exchange(message)
    yield children
    for child in children:
        child.close()


FUZZ_IDS = iter(range(1000, 10**9))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=INVOKE_PARAMS, meta=st.none() | METAS, string_id=st.booleans())
def test_arbitrary_invokes_get_the_same_reply_from_the_lane_and_the_sdk(
    pair: tuple[Served, Served], params: dict[str, Any], meta: Any, string_id: bool
) -> None:
    lane, sdk = pair
    number = next(FUZZ_IDS)
    message = request(f"f{number}" if string_id else number, "interceptor/invoke",
                      params if meta is None else {**params, "_meta": meta})  # fmt: skip
    lane.exchange(message)
    sdk.exchange(message)
    assert without_durations(lane.transcript[-1]) == without_durations(sdk.transcript[-1])
