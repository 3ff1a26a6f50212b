"""`mcp-interceptors proxy --router --upstream URL`: a real SDK server over Streamable HTTP (a subprocess on a
loopback port, tests/servers/http_upstream.py) behind the router gateway, driven by the SDK client on stdio.

Every wait is bounded and every process is reaped.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import IO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import STEP_S, TEST_S, GatewayProcess, Recorder, assert_no_zombies, text_of
from tests.processes import stop
from tests.servers.leaky_server import SECRETS
from tests.servers.upstream_server import FAIL_CODE, MARKER

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOKEN = "upstream-test-token"


def _start_upstream(flags: Sequence[str], stderr: IO[bytes]) -> tuple[subprocess.Popen[bytes], int | None, str]:
    """One start of the test upstream: the process and its port, or no port and why (exit status, elapsed time,
    the server's stderr, which holds its own stack dump when its start-up stalls: tests/servers/uvicorn_port.py)."""
    argv = [sys.executable, "-m", "tests.servers.http_upstream", *flags]
    process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr)
    assert process.stdout is not None
    started = time.monotonic()
    watchdog = threading.Timer(STEP_S, process.kill)  # a hang ends as an empty read, never a stuck test
    watchdog.start()
    try:
        line = process.stdout.readline()
    finally:
        watchdog.cancel()
    if line.startswith(b"PORT "):
        return process, int(line.split()[1]), ""
    status = process.wait(timeout=STEP_S)
    process.stdout.close()
    stderr.seek(0)
    output = stderr.read().decode(errors="replace")[-8000:]
    return process, None, f"stdout {line!r}, exit status {status} after {time.monotonic() - started:.1f} s:\n{output}"


@contextmanager
def http_upstream(*flags: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """The test upstream on 127.0.0.1 (ephemeral port): its URL and process, stopped and reaped at the end.

    The upstream is a test fixture (the SDK under uvicorn), not the code under test: a start that fails is
    reported as a warning with its diagnosis and tried once more; a second failure fails the test with both."""
    with tempfile.TemporaryFile() as first_err, tempfile.TemporaryFile() as second_err:
        process, port, first = _start_upstream(flags, first_err)
        if port is None:
            warnings.warn(f"the test upstream did not start, trying once more: {first}", RuntimeWarning, stacklevel=1)
            process, port, second = _start_upstream(flags, second_err)
            if port is None:
                pytest.fail(f"the test upstream did not start twice:\n1. {first}\n2. {second}")
        try:
            yield f"http://127.0.0.1:{port}/mcp", process
        finally:
            if process.poll() is None:
                stop(process)
            if process.stdout is not None:
                process.stdout.close()


def gateway_argv(url: str, *flags: str) -> list[str]:
    policy = () if "--policy" in flags else ("--policy", "none")
    return [sys.executable, "-m", "integrations.cli", "proxy", "--router", *policy, *flags, "--upstream", url]


def gateway_params(url: str, *flags: str) -> StdioServerParameters:
    argv = gateway_argv(url, *flags)
    return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))


@asynccontextmanager
async def client_for(url: str, *flags: str, recorder: Recorder | None = None) -> AsyncIterator[Client]:
    recorder = recorder or Recorder()
    async with Client(
        gateway_params(url, *flags),
        mode="legacy",
        logging_callback=recorder.on_log,
        message_handler=recorder.on_message,
        log_level="debug",
        read_timeout_seconds=STEP_S,
    ) as client:
        yield client


@pytest.mark.parametrize("reply", ["sse", "json"])
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_remote_upstream_round_trips_through_the_router_gateway(reply: str) -> None:
    recorder = Recorder()
    flags: Sequence[str] = ("--json",) if reply == "json" else ()
    with http_upstream(*flags) as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, recorder=recorder) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"echo", "progress", "fail", "sleep"} <= names
            assert text_of(await client.call_tool("echo", {"text": "over http"})) == "over http"
            done = await client.session.call_tool("progress", {"text": "p"}, progress_callback=recorder.on_progress)
            assert text_of(done) == "done: p"
            if reply == "sse":  # (a JSON reply has no stream for them: the SDK server sends them nowhere)
                # Progress and logs came on the call's own stream, tied to it, before its result.
                assert [p[2] for p in recorder.progress] == ["step 1: p", "step 2: p"]
                assert [log.data for log in recorder.logs] == ["log line: p", {"note": "p"}]
            with pytest.raises(MCPError) as failed:
                await client.call_tool("fail", {"text": MARKER})
            error = failed.value.error
            assert (error.code, error.message, error.data) == (FAIL_CODE, f"failed with {MARKER}", {"detail": MARKER})
            contents = (await client.read_resource("memo://greeting")).contents
            assert [getattr(c, "text", None) for c in contents] == [f"hello {MARKER}"]
            await client.send_ping()  # answered by the gateway
            if reply == "sse":  # a log outside any request comes on the standalone GET stream
                await client.set_logging_level("info")  # (the router sends those only to sessions that asked)
                assert text_of(await client.call_tool("later", {"text": "x"})) == "later"
                with anyio.fail_after(STEP_S):
                    while "late: x" not in [log.data for log in recorder.logs]:
                        await anyio.sleep(0.02)
    assert_no_zombies()


async def test_standard_policy_masks_a_credential_from_a_remote_upstream_on_every_channel() -> None:
    aws = SECRETS[0]
    masked = "AKIA************7P2L"
    recorder = Recorder()
    with http_upstream() as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, "--policy", "standard", recorder=recorder) as client:
            done = await client.session.call_tool("progress", {"text": aws}, progress_callback=recorder.on_progress)
            assert text_of(done) == f"done: {masked}"
            assert [p[2] for p in recorder.progress] == [f"step 1: {masked}", f"step 2: {masked}"]
            assert [log.data for log in recorder.logs] == [f"log line: {masked}", {"note": masked}]
            with pytest.raises(MCPError) as failed:
                await client.call_tool("fail", {"text": aws})
            assert failed.value.error.code == FAIL_CODE
            assert aws not in failed.value.error.message and aws not in json.dumps(failed.value.error.data)


async def test_upstream_headers_reach_the_remote_upstream() -> None:
    with http_upstream("--token", TOKEN) as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, "--upstream-header", f"Authorization: Bearer {TOKEN}") as client:
            assert text_of(await client.call_tool("echo", {"text": "let in"})) == "let in"
        refused = subprocess.run(
            gateway_argv(url), cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=STEP_S
        )
        assert refused.returncode == 1 and refused.stdout == b""
        bad = subprocess.run(
            gateway_argv(url, "--upstream-header", "no colon"), cwd=ROOT, capture_output=True, timeout=STEP_S
        )
        assert bad.returncode == 2 and b"--upstream-header number 1 is not of the form 'Name: value'" in bad.stderr


async def test_the_remote_upstream_going_away_answers_the_call_and_the_gateway_exits_1() -> None:
    with http_upstream() as (url, upstream), anyio.fail_after(TEST_S):
        gateway = GatewayProcess(gateway_argv(url))
        async with (
            gateway.running(),
            Client(gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S) as client,
        ):
            assert text_of(await client.call_tool("echo", {"text": "up"})) == "up"
            outcome: list[MCPError] = []

            async def long_call() -> None:
                with pytest.raises(MCPError) as gone:
                    await client.call_tool("sleep", {"seconds": 600})
                outcome.append(gone.value)

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(long_call)
                await anyio.sleep(0.5)  # either way (in flight or not yet sent) the call must get the error
                upstream.kill()
                upstream.wait(timeout=STEP_S)
            (error,) = outcome
            assert (error.error.code, error.error.message) == (INTERNAL_ERROR, "upstream server closed the connection")
            assert await gateway.wait(STEP_S) == 1
    assert_no_zombies()


def test_an_unreachable_or_invalid_upstream_url_is_a_clean_exit() -> None:
    with http_upstream() as (url, upstream):
        stop(upstream)
        unreachable = subprocess.run(
            gateway_argv(url), cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=STEP_S
        )
    assert unreachable.returncode == 1 and unreachable.stdout == b""
    assert b"unreachable" in unreachable.stderr
    invalid = subprocess.run(
        gateway_argv("ftp://example.invalid/mcp"), cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
        timeout=STEP_S,
    )  # fmt: skip
    assert invalid.returncode == 2 and b"--upstream takes an http:// or https:// URL" in invalid.stderr
    assert b"its scheme is 'ftp'" in invalid.stderr and b"example.invalid" not in invalid.stderr
    both = subprocess.run(
        [*gateway_argv("http://127.0.0.1:9/mcp"), "--", sys.executable, "-c", "pass"], cwd=ROOT,
        stdin=subprocess.DEVNULL, capture_output=True, timeout=STEP_S,
    )  # fmt: skip
    assert both.returncode == 2 and b"not both" in both.stderr


PLANTED = "PLANTEDcredential42"


def with_credentials(url: str) -> str:
    """The URL with a password in its userinfo and a token in its query, as an operator might give it."""
    scheme, rest = url.split("://", 1)
    return f"{scheme}://operator:{PLANTED}@{rest}?api_key={PLANTED}"


async def test_the_upstream_url_and_headers_are_never_echoed_to_stderr() -> None:
    with http_upstream() as (url, upstream), anyio.fail_after(TEST_S):
        secret_url = with_credentials(url)
        gateway = GatewayProcess([*gateway_argv(secret_url), "-vv"])  # DEBUG: the HTTP client's own lines too
        async with (
            gateway.running(),
            Client(gateway.transport(), mode="legacy", read_timeout_seconds=STEP_S) as client,
        ):
            assert text_of(await client.call_tool("echo", {"text": "up"})) == "up"
        stop(upstream)
        unreachable = subprocess.run(
            [*gateway_argv(secret_url), "-v"], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=STEP_S,
        )  # fmt: skip
    logged = "".join(gateway.stderr)
    assert "HTTP Request: POST http://REDACTED@127.0.0.1" in logged and "?REDACTED" in logged  # redacted, not gone
    assert unreachable.returncode == 1 and b"unreachable" in unreachable.stderr
    print("unreachable:", unreachable.stderr.decode().strip().splitlines()[-1])
    assert b"REDACTED@127.0.0.1" in unreachable.stderr
    invalid = subprocess.run(
        gateway_argv(f"ftp://{PLANTED}@example.invalid/mcp?k={PLANTED}"), cwd=ROOT, stdin=subprocess.DEVNULL,
        capture_output=True, timeout=STEP_S,
    )  # fmt: skip
    malformed = subprocess.run(
        gateway_argv(url, "--upstream-header", "X-Ok: 1", "--upstream-header", f"Authorization Bearer {PLANTED}"),
        cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, timeout=STEP_S,
    )  # fmt: skip
    assert invalid.returncode == 2 and malformed.returncode == 2
    assert b"--upstream-header number 2 is not of the form" in malformed.stderr
    for stderr in (logged.encode(), unreachable.stderr, invalid.stderr, malformed.stderr):
        assert PLANTED.encode() not in stderr


async def test_a_remote_request_that_is_never_answered_times_out_and_is_cancelled_upstream() -> None:
    with http_upstream() as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, "--upstream-timeout", "1") as client:
            started = time.monotonic()
            with pytest.raises(MCPError) as timed_out:
                await client.call_tool("sleep", {"seconds": 600})
            elapsed = time.monotonic() - started
            # On time: never early, and late by far less than its own length (the clock is read every 0.1 s;
            # the bound is 3x the timeout, the duration being the behaviour under test).
            assert 1.0 <= elapsed < 3.0, elapsed
            assert timed_out.value.error.code == -32001
            assert timed_out.value.error.data == {"reason": "upstream timeout", "timeoutSeconds": 1.0}
            with anyio.fail_after(STEP_S):  # the cancellation reached the remote server
                while True:
                    stats = (await client.call_tool("stats", {})).structured_content or {}
                    if stats.get("cancelled"):
                        break
                    await anyio.sleep(0.05)


@pytest.mark.parametrize("reply", ["sse", "json"])
async def test_an_oversized_remote_reply_answers_its_request_and_the_session_goes_on(reply: str) -> None:
    flags: Sequence[str] = ("--json",) if reply == "json" else ()
    big = "x" * (3 << 19)  # 1.5 MiB: the request fits the client's bound, its echo not the upstream's 1 MiB
    with http_upstream(*flags) as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, "--max-line-mib", "1") as client:
            with pytest.raises(MCPError) as oversized:
                await client.call_tool("echo", {"text": big})
            assert oversized.value.error.code == INTERNAL_ERROR
            assert isinstance(oversized.value.error.data, dict)
            assert "larger than the gateway accepts" in oversized.value.error.data["reason"]
            assert text_of(await client.call_tool("echo", {"text": "small"})) == "small"


async def test_a_request_stream_the_server_ends_early_is_resumed_with_last_event_id() -> None:
    recorder = Recorder()
    with http_upstream("--resumable") as (url, _), anyio.fail_after(TEST_S):
        async with client_for(url, recorder=recorder) as client:
            polled = await client.session.call_tool("poll", {}, progress_callback=recorder.on_progress)
            assert text_of(polled) == "polled"
            assert [p[2] for p in recorder.progress] == ["after the stream closed"]  # replayed, tied to the call
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"
