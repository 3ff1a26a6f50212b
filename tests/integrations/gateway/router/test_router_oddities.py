"""Every JSON-RPC oddity a client can send gets exactly one answer, and the router keeps its policy after it
(issue 31): tables on the pure router, the nesting bound as a property, and one stdio process test."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from integrations.gateway.router import ChainBlocked, ChainOutcome, ChainPassed, Router, RunChain, SendDownstream
from interceptors.protocol.framing import MAX_LINE_BYTES
from interceptors.protocol.messages import MAX_DEPTH, _deeper_than
from tests.conftest import ROOT
from tests.router_helpers import body, downstream, handshake_session, line, ready_router, settle

FORBIDDEN = "forbidden"


def policy(run: RunChain) -> ChainOutcome:
    """A policy that hides one tool: a call of it is refused as missing."""
    payload = run.payload if isinstance(run.payload, dict) else {}
    params = payload.get("params") if isinstance(payload.get("params"), dict) else {}
    if run.event == "tools/call" and isinstance(params, dict) and params.get("name") == FORBIDDEN:
        return ChainBlocked(not_found=True)
    return ChainPassed(run.payload)


def deep(levels: int) -> bytes:
    """A ping whose params nest `levels` deep in all (the message object is level 1, params level 2)."""
    inner = b"[" * (levels - 2) + b"]" * (levels - 2)
    return b'{"jsonrpc":"2.0","id":8,"method":"ping","params":{"x":' + inner + b"}}"


# (name, raw line, expected id, expected code; None: a success)
ODDITIES: list[tuple[str, bytes, Any, int | None]] = [
    ("batch of one", b'[{"jsonrpc":"2.0","id":2,"method":"ping"}]', None, -32600),
    (
        "batch of two",
        b'[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]',
        None,
        -32600,
    ),
    ("empty batch", b"[]", None, -32600),
    ("id 1.0", b'{"jsonrpc":"2.0","id":1.0,"method":"ping"}', None, -32600),
    ("id true", b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None, -32600),
    ("id {}", b'{"jsonrpc":"2.0","id":{},"method":"ping"}', None, -32600),
    ("id []", b'{"jsonrpc":"2.0","id":[],"method":"ping"}', None, -32600),
    ("id null", b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None, -32600),
    ("duplicate id key: the last one", b'{"jsonrpc":"2.0","id":3,"id":4,"method":"ping"}', 4, None),
    ("lone surrogate", b'{"jsonrpc":"2.0","id":5,"method":"ping","params":{"x":"\\ud800"}}', 5, -32602),
    ("lone surrogate in the method", b'{"jsonrpc":"2.0","id":5,"method":"\\udc00"}', 5, -32600),
    ("NaN", b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":NaN}}', 6, -32700),
    ("Infinity", b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":-Infinity}}', 6, -32700),
    ("invalid UTF-8", b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\xff\xfe"}}', 7, -32700),
    ("deep nesting, at the bound", deep(MAX_DEPTH), 8, None),
    ("deep nesting, past the bound", deep(MAX_DEPTH + 1), 8, -32600),
    ("deep nesting, past orjson's own bound", deep(5000), 8, -32600),
    ("not JSON", b"hello", None, -32700),
    ("a JSON string", b'"x"', None, -32600),
    ("a truncated object", b'{"jsonrpc":"2.0","id":9,"method":"pi', 9, -32700),
    ("no jsonrpc", b'{"id":10,"method":"ping"}', 10, -32600),
    ("params an array", b'{"jsonrpc":"2.0","id":11,"method":"ping","params":[1]}', 11, -32602),
]


def assert_still_serving(router: Router) -> None:
    """After an oddity: ping is answered, a tool call goes upstream, the hidden tool is still missing."""
    (pong,) = downstream(settle(router, router.receive_downstream("a", line(id="after", method="ping")), policy))
    assert pong == {"jsonrpc": "2.0", "id": "after", "result": {}}
    raw = line(id="hidden", method="tools/call", params={"name": FORBIDDEN})
    (refused,) = downstream(settle(router, router.receive_downstream("a", raw), policy))
    assert refused["error"] == {"code": -32602, "message": f"Unknown tool: {FORBIDDEN}"}


@pytest.mark.parametrize(("name", "raw", "expected_id", "code"), ODDITIES, ids=[case[0] for case in ODDITIES])
def test_every_oddity_gets_exactly_one_answer_and_the_policy_holds(
    name: str, raw: bytes, expected_id: Any, code: int | None
) -> None:
    router = ready_router()
    handshake_session(router, "a")
    actions = settle(router, router.receive_downstream("a", raw), policy)
    assert all(isinstance(action, SendDownstream) for action in actions), name
    (answer,) = [body(action) for action in actions]
    assert answer["id"] == expected_id
    if code is None:
        assert "result" in answer
    else:
        assert answer["error"]["code"] == code and answer["error"]["data"]["reason"]
    assert_still_serving(router)


def test_a_duplicate_key_is_read_once_the_same_way_for_the_policy_and_the_upstream() -> None:
    """JSON leaves duplicate keys to the reader: the gateway reads the last one, once, so the tool the policy
    judges is the tool that goes upstream (the message is re-serialised from that one reading)."""
    router = ready_router()
    handshake_session(router, "a")
    raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ok","name":"' + FORBIDDEN.encode() + b'"}}'
    (refused,) = downstream(settle(router, router.receive_downstream("a", raw), policy))
    assert refused["error"]["message"] == f"Unknown tool: {FORBIDDEN}"
    raw = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"' + FORBIDDEN.encode() + b'","name":"ok"}}'
    sent = [
        body(a)
        for a in settle(router, router.receive_downstream("a", raw), policy)
        if not isinstance(a, SendDownstream)
    ]
    assert [message["params"]["name"] for message in sent] == ["ok"]


def test_requests_before_initialize_are_refused_with_their_id() -> None:
    router = ready_router()
    router.open_session("a", context={}, principal="a")
    for request_id, method in ((1, "tools/list"), ("two", "tools/call"), (3, "resources/read")):
        (answer,) = downstream(settle(router, router.receive_downstream("a", line(id=request_id, method=method))))
        assert answer["id"] == request_id and answer["error"]["code"] == -32600
    (pong,) = downstream(settle(router, router.receive_downstream("a", line(id=4, method="ping"))))
    assert pong["result"] == {}


def test_a_batch_is_refused_with_one_error_worded_for_the_session_version() -> None:
    for version, words in (("2025-03-26", "batches are optional at 2025-03-26"), ("2025-11-25", "since 2025-06-18")):
        router = ready_router()
        router.open_session("a", context={}, principal="a")
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
        settle(router, router.receive_downstream("a", line(id=0, method="initialize", params=params)))
        batch = json.dumps([{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(5)]).encode()
        (answer,) = downstream(settle(router, router.receive_downstream("a", batch)))
        assert answer["id"] is None and words in answer["error"]["data"]["reason"]


def test_a_million_element_result_passes_as_one_reply() -> None:
    """The nesting check of a wide result is done in C (a walk in Python took seconds)."""
    router = ready_router()
    handshake_session(router, "a")
    (sent,) = [
        body(a)
        for a in settle(router, router.receive_downstream("a", line(id=1, method="tools/call", params={"name": "x"})))
    ]
    result = {
        "content": [{"type": "text", "text": str(n)} for n in range(10**6)],
        "structuredContent": {"n": list(range(10**6))},
    }
    raw = orjson.dumps({"jsonrpc": "2.0", "id": sent["id"], "result": result})
    (reply,) = [a for a in settle(router, router.receive_upstream(raw)) if isinstance(a, SendDownstream)]
    assert reply.data == raw.replace(f'"id":{sent["id"]}'.encode(), b'"id":1', 1)


# The nesting bound ------------------------------------------------------------------------------

_SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(alphabet='[]{}"\\ax\n\u00e9\U0001f600')
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_SCALARS.filter(lambda v: isinstance(v, str)), inner, max_size=3)
    ),
    max_leaves=40,
)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(item) for item in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(item) for item in value), default=0)
    return 0


def _nest(value: Any, levels: int) -> Any:
    for n in range(levels):
        value = [value] if n % 2 else {'"[{\\': value}
    return value


@given(_JSON, st.integers(0, 12), st.integers(0, 14))
@example('\\"[', 3, 3)
@example({"\\": ["\\\\", {}]}, 0, 2)
def test_deeper_than_is_the_depth_of_the_value(value: Any, levels: int, bound: int) -> None:
    nested = _nest(value, levels)
    assert _deeper_than(orjson.dumps(nested), bound) == (_depth(nested) > bound)
    assert _deeper_than(json.dumps(nested, indent=1).encode(), bound) == (_depth(nested) > bound)


# One process test over stdio ---------------------------------------------------------------------


@pytest.mark.slow
def test_the_stdio_gateway_answers_every_oddity_and_oversized_lines_with_their_id() -> None:
    """The real `proxy` on pipes: each oddity gets one line back in order; a line over the 64 MiB limit gets
    its error with its id when its first bytes hold it (else id null, and a log line); the gateway then
    still answers."""
    argv = [sys.executable, "-m", "integrations.cli", "proxy", "--policy", "none", "--"]
    argv += [sys.executable, "-m", "tests.servers.sync_upstream"]
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    init_line = line(id="init", method="initialize", params=init)
    chunks = [init_line + b"\n", line(method="notifications/initialized") + b"\n"]  # written as they are
    expected: list[tuple[Any, int | None]] = [("init", None)]
    for _name, raw, expected_id, code in ODDITIES:
        chunks.append(raw + b"\n")
        expected.append((expected_id, code))
    filler = b"x" * (MAX_LINE_BYTES + 16)  # one object, written twice: an oversized line is never joined
    head = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"text":"'
    chunks += [head, filler, b'"}}}\n']
    expected.append(("big", -32600))
    chunks += [b'{"jsonrpc":"2.0","method":"tools/call","params":{"text":"', filler, b'"},"id":"late"}\n']
    expected.append((None, -32600))
    echo = line(id="echo", method="tools/call", params={"name": "echo", "arguments": {"text": "still here"}})
    chunks.append(echo + b"\n")
    expected.append(("echo", None))
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT)
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        for chunk in chunks:
            process.stdin.write(chunk)
        process.stdin.flush()
        answers = [json.loads(process.stdout.readline()) for _ in expected]  # a hang here: the test's timeout
    finally:
        process.stdin.close()
        process.wait(60)
    stderr = process.stderr.read()
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == expected, stderr.decode()[-2000:]
    assert answers[-1]["result"]["content"][0]["text"] == "still here"
    assert b"refused a client request over the 64 MiB line limit" in stderr
    assert b"dropped a client message over the 64 MiB line limit (no id in its first bytes)" in stderr
