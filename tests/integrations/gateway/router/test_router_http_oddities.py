"""Every JSON-RPC oddity gets exactly one answer through the HTTP front too (issue 31): the table of
tests/integrations/gateway/router/test_router_oddities.py POSTed to `proxy --listen` one body each, a body over the 64
MiB limit (answered
with its id when its first bytes hold one), and a million-element result; the gateway goes on serving after
them all (the router-level tests there show the policy holds).

Every wait is bounded (`fail_after`) and the gateway process is stopped and reaped.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio
import httpx2
import orjson
import pytest

from interceptors.protocol.framing import MAX_LINE_BYTES
from tests.integrations.gateway.router.test_router_http import headers_for, http_gateway, open_session, rpc
from tests.integrations.gateway.router.test_router_oddities import ODDITIES
from tests.integrations.gateway.test_gateway import STEP_S

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

WIDE = [sys.executable, "-m", "tests.servers.wide_upstream"]


def _answer(response: httpx2.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("text/event-stream"):  # (a long wait is pinged on SSE)
        (answer,) = [orjson.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        assert isinstance(answer, dict)
        return answer
    assert response.headers["content-type"].startswith("application/json"), response.headers
    answer = orjson.loads(response.content)
    assert isinstance(answer, dict)
    return answer


async def test_the_http_front_answers_every_oddity_once_and_keeps_serving() -> None:
    async with (
        http_gateway("--policy", "none", upstream=WIDE) as gateway,
        httpx2.AsyncClient(timeout=STEP_S) as http,
    ):
        with anyio.fail_after(STEP_S):
            session = await open_session(http, gateway.url)
            headers = headers_for(session)
            for name, raw, expected_id, code in ODDITIES:
                answer = _answer(await http.post(gateway.url, content=raw, headers=headers))
                assert answer["id"] == expected_id, name
                if code is None:
                    assert "result" in answer, name
                else:
                    assert answer["error"]["code"] == code and answer["error"]["data"]["reason"], name
            echo = rpc("echo", "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
            answer = _answer(await http.post(gateway.url, json=echo, headers=headers))
            assert answer["result"]["content"][0]["text"] == "still here"


async def test_bodies_over_the_limit_are_refused_with_their_id_when_it_comes_first() -> None:
    filler = b"x" * (MAX_LINE_BYTES + 16)
    head = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"echo","arguments":{"text":"'
    late = b'{"jsonrpc":"2.0","method":"tools/call","params":{"text":"'
    async with http_gateway(upstream=WIDE) as gateway, httpx2.AsyncClient(timeout=STEP_S) as http:
        with anyio.fail_after(STEP_S):
            session = await open_session(http, gateway.url)
            for body, expected_id in ((head + filler + b'"}}}', "big"), (late + filler + b'"},"id":"late"}', None)):
                response = await http.post(gateway.url, content=body, headers=headers_for(session))
                assert response.status_code == 413
                answer = _answer(response)
                assert answer["id"] == expected_id and answer["error"]["code"] == -32600
            del filler
            echo = rpc("echo", "tools/call", {"name": "echo", "arguments": {"text": "still here"}})
            answer = _answer(await http.post(gateway.url, json=echo, headers=headers_for(session)))
            assert answer["result"]["content"][0]["text"] == "still here"


async def test_a_million_element_result_reaches_an_http_client_whole() -> None:
    """With `--policy none` (the standard policy's output stages cap and walk such a result: another matter)."""
    async with (
        http_gateway("--policy", "none", upstream=WIDE) as gateway,
        httpx2.AsyncClient(timeout=STEP_S) as http,
    ):
        with anyio.fail_after(STEP_S):  # a bound on a hang: the issue saw 22-44 s; a copy of 7 MB takes ms
            session = await open_session(http, gateway.url)
            call = rpc("wide", "tools/call", {"name": "wide", "arguments": {"text": "wide"}})
            started = time.monotonic()
            answer = _answer(await http.post(gateway.url, json=call, headers=headers_for(session)))
            print(f"a million-element result through the HTTP front: {time.monotonic() - started:.2f} s")
            assert answer["result"]["structuredContent"]["n"] == list(range(10**6))
