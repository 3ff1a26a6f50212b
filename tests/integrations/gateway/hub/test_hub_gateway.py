"""One gateway in front of several servers (issue 35), end to end: the real `mcp` SDK client, the real
`mcp-interceptors proxy --config` process, real subprocess upstreams (`tests/servers/`).

The aggregated endpoint over stdio and HTTP (namespaced catalogs, calls routed back, progress, logs with the
server's name, subscriptions, list_changed, cancellation, completions, paging of merged lists, sampling and
roots relayed to the server that asked), per-principal views, the per-server endpoints (`--server NAME`,
`/servers/NAME/mcp`), `/healthz`, and supervision (a killed server fails fast naming itself and comes back
without the client reconnecting; a server that cannot start or never answers leaves the others alone).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from interceptors import INTERNAL_ERROR, INVALID_PARAMS
from tests.conftest import ROOT
from tests.integrations.gateway.test_gateway import (
    STEP_S,
    TEST_S,
    Recorder,
    assert_no_zombies,
    gateway_pids,
    text_of,
    wait_gone,
)
from tests.processes import children, listening_url, stop
from tests.servers.upstream_server import GREETING_URI

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

UPSTREAM = [sys.executable, "-m", "tests.servers.upstream_server"]
ROOTS = [sys.executable, "-m", "tests.servers.roots_upstream"]
PAGED = [sys.executable, "-m", "tests.servers.hub_upstream", "paged", "5"]
SILENT = [sys.executable, "-m", "tests.servers.hub_upstream", "silent"]


def write_file(tmp_path: Path, servers: dict[str, Any], name: str = "gateway.json", **top: Any) -> Path:
    document = {
        "policy": "none",
        **top,
        "servers": {k: {**({"cwd": str(ROOT)} if "command" in v else {}), **v} for k, v in servers.items()},
    }
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


def hub_argv(path: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "integrations.cli", "proxy", "--config", str(path), *flags]


def hub_client(path: Path, *flags: str, **options: Any) -> Client:
    argv = hub_argv(path, *flags)
    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    return Client(params, mode="legacy", read_timeout_seconds=STEP_S, **options)


def names(tools: types.ListToolsResult) -> set[str]:
    return {tool.name for tool in tools.tools}


async def stats(client: Client, server: str) -> dict[str, Any]:
    result = await client.call_tool(f"{server}__stats", {})
    assert result.structured_content is not None
    return dict(result.structured_content)


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
def write_tokens(tmp_path: Path) -> Path:
    """A tokens file (mode 600): `fay-token` has role `files`, `ada-token` role `admin`."""
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n  - {id: fay, token: fay-token, roles: [files]}\n  - {id: ada, token: ada-token, roles: [admin]}\n"
    )
    os.chmod(tokens, 0o600)
    return tokens


async def check_both_servers(client: Client) -> None:
    """Both servers' tools and resources through the aggregate, by prefixed name; calls routed back; a server's
    error names it; a name of no server is an unknown tool (the same in either era)."""
    tools = names(await client.list_tools())
    assert {"alpha__echo", "beta__echo", "alpha__progress"} <= tools
    assert all(name.startswith(("alpha__", "beta__")) for name in tools)
    echoed = await client.call_tool("beta__echo", {"text": "hi b"})
    assert text_of(echoed) == "hi b" and echoed.result_type == "complete"
    assert text_of(await client.call_tool("alpha__echo", {"text": "hi a"})) == "hi a"
    with pytest.raises(MCPError) as failed:  # the server's error, naming the server
        await client.call_tool("beta__fail", {"text": "boom"})
    assert "server 'beta'" in failed.value.error.message and failed.value.error.data["server"] == "beta"
    with pytest.raises(MCPError) as unknown:
        await client.call_tool("gamma__echo", {})
    assert (unknown.value.error.code, unknown.value.error.message) == (INVALID_PARAMS, "Unknown tool: gamma__echo")
    uris = [str(r.uri) for r in (await client.list_resources()).resources]
    assert uris == [f"alpha+{GREETING_URI}", f"beta+{GREETING_URI}"]
    note = await client.read_resource("beta+memo://notes/ideas")
    assert [c.text for c in note.contents if isinstance(c, types.TextResourceContents)] == ["note ideas"]


async def test_the_aggregate_merges_namespaced_catalogs_and_routes_every_feature_back(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}, "beta": {"command": UPSTREAM}})
    recorder = Recorder()
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    client = hub_client(path, logging_callback=recorder.on_log, message_handler=recorder.on_message)
    with anyio.fail_after(TEST_S):
        async with client:
            instructions = client.instructions or ""
            assert "alpha__" not in instructions and "SECRET-MARKER" not in instructions  # no server's own text
            assert "alpha (alpha)" in instructions
            assert "beta__add_tool" in names(await client.list_tools())
            await check_both_servers(client)
            # templates under the same per-server URI prefix; prompts and completions by prefixed name
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert templates == ["alpha+memo://notes/{name}", "beta+memo://notes/{name}"]
            assert [p.name for p in (await client.list_prompts()).prompts] == ["alpha__greet", "beta__greet"]
            prompt = await client.get_prompt("beta__greet", {"name": "Ada"})
            assert isinstance(prompt.messages[0].content, types.TextContent)
            assert prompt.messages[0].content.text == "Hello Ada"
            completed = await client.complete(
                types.PromptReference(name="alpha__greet"), {"name": "name", "value": "al"}
            )
            assert completed.completion.values == ["alice", "albert"]

            # progress reaches the caller; logs carry the server's name
            await client.set_logging_level("debug")
            await client.call_tool(
                "beta__progress", {"text": "p", "steps": 2, "interval": 0.01}, progress_callback=on_progress
            )
            assert progress
            assert any(log.logger is not None and log.logger.startswith("beta") for log in recorder.logs)
            await client.set_logging_level("warning")
            assert (await stats(client, "alpha"))["level"] == "warning"

            # a subscription and its update, namespaced; list_changed from one server updates the merged catalog
            await client.subscribe_resource(f"alpha+{GREETING_URI}")
            assert GREETING_URI in (await stats(client, "alpha"))["subscribed"]
            await client.call_tool("alpha__touch", {"uri": GREETING_URI})
            updated = await recorder.notified(types.ResourceUpdatedNotification)
            assert str(updated.params.uri) == f"alpha+{GREETING_URI}"
            await client.call_tool("beta__add_tool", {})
            await recorder.notified(types.ToolListChangedNotification)
            after = names(await client.list_tools())
            assert "beta__bonus" in after and "alpha__bonus" not in after
            assert text_of(await client.call_tool("beta__bonus", {})) is not None

            # cancellation reaches the server that runs the call
            before = (await stats(client, "alpha"))["cancelled"]
            with pytest.raises(MCPError):
                await client.call_tool("alpha__sleep", {"seconds": 30}, read_timeout_seconds=0.5)
            with anyio.fail_after(20):
                while (await stats(client, "alpha"))["cancelled"] == before:
                    await anyio.sleep(0.05)
            (gateway,) = gateway_pids()
            upstreams = list(children(gateway))
            assert len(upstreams) == 2  # one process per server
    await wait_gone([gateway, *upstreams])  # the client left: the gateway and every server exit
    assert_no_zombies()


async def test_merged_lists_are_paged_and_a_silent_server_is_left_out_and_named(tmp_path: Path) -> None:
    path = write_file(
        tmp_path, {"paged": {"command": PAGED}, "slow": {"command": SILENT}, "e": {"command": UPSTREAM}}, list_timeout=1
    )
    with anyio.fail_after(TEST_S):
        async with hub_client(path) as client:
            seen: list[str] = []
            cursor: str | None = None
            pages = 0
            while True:
                page = await client.list_tools(cursor=cursor)
                pages += 1
                seen += [tool.name for tool in page.tools]
                meta = page.meta or {}
                assert meta.get("io.mcp-interceptors/unavailable", {}).keys() <= {"slow"}
                cursor = page.next_cursor
                if cursor is None:
                    break
            assert pages == 3  # the paged server's three pages; the others fit in the first
            assert [n for n in seen if n.startswith("paged__")] == [f"paged__t{i}" for i in range(5)]
            assert len(seen) == len(set(seen)) and "e__echo" in seen and not any(n.startswith("slow__") for n in seen)
            first = await client.list_tools()
            assert "slow" in (first.meta or {})["io.mcp-interceptors/unavailable"]
            assert text_of(await client.call_tool("paged__t3", {})) == "t3"
            with pytest.raises(MCPError) as bad:
                await client.list_tools(cursor="not-a-cursor")
            assert bad.value.error.code == INVALID_PARAMS


async def test_sampling_and_roots_are_relayed_to_the_server_that_asked(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"files": {"command": ROOTS}, "alpha": {"command": UPSTREAM}})
    sampled: list[Any] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/hub-root", name="hub")])

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        sampled.append(params)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled!"), model="test-model"
        )

    with anyio.fail_after(TEST_S):
        async with hub_client(path, list_roots_callback=list_roots, sampling_callback=sample) as client:
            tools = names(await client.list_tools())
            assert {"files__roots", "files__sample", "alpha__echo"} <= tools
            with anyio.fail_after(10):
                while "hub-root" not in text_of(await client.call_tool("files__roots", {})):
                    await anyio.sleep(0.05)
            result = text_of(await client.call_tool("files__sample", {}))
            assert "sampled!" in result and sampled


async def test_a_killed_server_fails_fast_naming_itself_and_comes_back_without_reconnecting(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}, "beta": {"command": UPSTREAM}})
    with anyio.fail_after(TEST_S):
        async with hub_client(path) as client:
            assert "alpha__echo" in names(await client.list_tools())
            with pytest.raises(MCPError) as crashed:
                await client.call_tool("alpha__crash", {})
            assert "server 'alpha'" in crashed.value.error.message
            failures: list[float] = []
            with anyio.fail_after(30):
                while True:  # meanwhile: alpha's calls fail fast, naming it; beta's go on
                    assert text_of(await client.call_tool("beta__echo", {"text": "b"})) == "b"
                    started = time.monotonic()
                    try:
                        echoed = await client.call_tool("alpha__echo", {"text": "back"})
                    except MCPError as exc:
                        failures.append(time.monotonic() - started)
                        assert exc.error.code == INTERNAL_ERROR and exc.error.data["server"] == "alpha"
                        assert "alpha" in exc.error.message
                        await anyio.sleep(0.05)
                        continue
                    assert text_of(echoed) == "back"  # restarted: the same client session, no reconnect
                    break
            assert all(seconds < 5 for seconds in failures)  # at once (the acceptance's bound is 1 s)
            assert "alpha__echo" in names(await client.list_tools())


async def test_a_server_that_cannot_start_never_blocks_the_others(tmp_path: Path) -> None:
    path = write_file(tmp_path, {"broken": {"command": ["/nonexistent/server"]}, "alpha": {"command": UPSTREAM}})
    with anyio.fail_after(TEST_S):
        async with hub_client(path) as client:
            listed = await client.list_tools()
            assert "alpha__echo" in names(listed)
            assert "broken" in (listed.meta or {})["io.mcp-interceptors/unavailable"]
            started = time.monotonic()
            with pytest.raises(MCPError) as down:
                await client.call_tool("broken__anything", {})
            assert time.monotonic() - started < 5 and down.value.error.data["server"] == "broken"
            assert text_of(await client.call_tool("alpha__echo", {"text": "ok"})) == "ok"


async def test_a_role_sees_only_the_servers_its_role_may_use_over_stdio(tmp_path: Path) -> None:
    servers = {"fs": {"command": UPSTREAM, "roles": ["files"]}, "mem": {"command": UPSTREAM, "roles": ["admin"]}}
    path = write_file(tmp_path, servers)
    with anyio.fail_after(TEST_S):
        async with hub_client(path, "--role", "files") as client:
            tools = names(await client.list_tools())
            assert "fs__echo" in tools and not any(name.startswith("mem__") for name in tools)
            with pytest.raises(MCPError) as hidden:  # hidden equals missing
                await client.call_tool("mem__echo", {"text": "x"})
            assert hidden.value.error.message == "Unknown tool: mem__echo"


async def test_a_claude_desktop_file_is_served_as_is_whole_or_one_server(tmp_path: Path) -> None:
    document = {
        "mcpServers": {
            "my_server": {"command": UPSTREAM[0], "args": UPSTREAM[1:], "env": {"PYTHONPATH": str(ROOT)}},
            "paged": {"command": PAGED[0], "args": PAGED[1:], "env": {"PYTHONPATH": str(ROOT)}},
        },
        "globalShortcut": "",
    }
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps(document))
    with anyio.fail_after(TEST_S):
        async with hub_client(path, "--policy", "none") as client:
            tools = names(await client.list_tools())
            assert "my-server__echo" in tools and "paged__t0" in tools
        async with hub_client(path, "--server", "my_server", "--policy", "none") as client:  # today's gateway
            assert "echo" in names(await client.list_tools())
            assert text_of(await client.call_tool("echo", {"text": "direct"})) == "direct"


def test_a_bad_gateway_file_is_one_line_naming_the_server_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("servers:\n  web:\n    url: http://127.0.0.1:9/mcp\n    hedaers: {}\n")
    done = subprocess.run(hub_argv(path), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {path}: server 'web': unknown key 'hedaers' (did you mean 'headers'?)"
    ]
    done = subprocess.run(hub_argv(path, "--server", "nope"), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2 and "unknown key" in done.stderr
    path.write_text("servers:\n  web:\n    url: http://127.0.0.1:9/mcp\n    policy: no-such-profile\n")
    done = subprocess.run(hub_argv(path), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 2  # refused before anything starts, never a server left down
    assert done.stderr.startswith(f"error: {path}: server 'web': no built-in profile or policy file named")


async def test_http_serves_the_aggregate_per_principal_each_server_alone_and_health(tmp_path: Path) -> None:
    servers = {
        "fs": {"command": UPSTREAM, "roles": ["files", "admin"]},
        "mem": {"command": UPSTREAM, "roles": ["admin"]},
        "lazy": {"command": UPSTREAM, "start": "on-first-use"},
    }
    path = write_file(tmp_path, servers, policy="standard")  # (its chain counts the requests in /metrics)
    tokens = write_tokens(tmp_path)
    process = subprocess.Popen(
        hub_argv(path, "--listen", "127.0.0.1:0", "--tokens", str(tokens)), cwd=ROOT, stderr=subprocess.PIPE
    )
    try:
        url = listening_url(process)
        base = url.removesuffix("/mcp")
        with anyio.fail_after(TEST_S):
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                health = (await http.get(f"{base}/healthz")).json()
                assert health["servers"]["lazy"]["state"] == "idle"  # started by its first use only
                refused = await http.post(
                    f"{base}/servers/mem/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={"authorization": "Bearer fay-token", "accept": "application/json, text/event-stream"},
                )
                assert refused.status_code == 404  # a server outside the principal's roles: as unknown
            for bearer, want_mem in (("fay-token", False), ("ada-token", True)):
                async with (
                    httpx2.AsyncClient(headers={"authorization": f"Bearer {bearer}"}, timeout=STEP_S) as http,
                    Client(
                        streamable_http_client(url, http_client=http), mode="legacy", read_timeout_seconds=STEP_S
                    ) as client,
                ):
                    tools = names(await client.list_tools())
                    assert "fs__echo" in tools and any(n.startswith("mem__") for n in tools) is want_mem
                    assert text_of(await client.call_tool("fs__echo", {"text": bearer})) == bearer
            async with (
                httpx2.AsyncClient(headers={"authorization": "Bearer ada-token"}, timeout=STEP_S) as http,
                Client(
                    streamable_http_client(f"{base}/servers/mem/mcp", http_client=http),
                    mode="legacy",
                    read_timeout_seconds=STEP_S,
                ) as client,
            ):
                assert "echo" in names(await client.list_tools())  # the server alone: its own names
                assert text_of(await client.call_tool("echo", {"text": "alone"})) == "alone"
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                health = (await http.get(f"{base}/healthz")).json()
                assert {name: s["state"] for name, s in health["servers"].items()} == {
                    "fs": "ready",
                    "mem": "ready",
                    "lazy": "ready",  # the aggregate's first list started it
                }
                metrics = (await http.get(f"{base}/metrics")).text
                assert 'mcp_interceptors_upstream_up{server="mem"} 1' in metrics
                assert 'mcp_interceptors_requests_total{server="fs",method="tools/call",outcome="passed"} 2' in metrics
                unauthenticated = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                assert unauthenticated.status_code == 401
            process.send_signal(signal.SIGHUP)  # each server's policy read again; the gateway goes on
            await anyio.sleep(0.5)
            async with httpx2.AsyncClient(timeout=STEP_S) as http:
                assert (await http.get(f"{base}/healthz")).status_code == 200
            assert process.poll() is None
            upstreams = list(children(process.pid))
            assert len(upstreams) == 3
            process.terminate()  # SIGTERM: status 0, every server gone
            assert process.wait(timeout=STEP_S) == 0
            await wait_gone(upstreams)
    finally:
        stop(process)


async def test_one_audit_log_labels_each_entry_with_its_server(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    policy = tmp_path / "recorded.yaml"
    policy.write_text("name: recorded\nextends: open\naudit: true\n")
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}, "beta": {"command": UPSTREAM}}, audit_log=str(audit))
    document = json.loads(path.read_text())
    document["policy"] = str(policy)
    path.write_text(json.dumps(document))
    with anyio.fail_after(TEST_S):
        async with hub_client(path) as client:
            await client.call_tool("alpha__echo", {"text": "a"})
            await client.call_tool("beta__echo", {"text": "b"})
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    calls = {(entry["server"], entry["name"]) for entry in entries if entry["kind"] == "tool"}
    assert {("alpha", "echo"), ("beta", "echo")} <= calls
    assert all(entry["server"] in ("alpha", "beta") for entry in entries)


async def test_an_http_upstream_with_headers_and_an_on_first_use_server(tmp_path: Path) -> None:
    from tests.integrations.gateway.router.test_router_upstream_http import http_upstream

    with http_upstream("--token", "s3cret") as (url, _):
        servers = {
            "remote": {"url": url, "headers": {"Authorization": "Bearer s3cret"}},
            "lazy": {"command": UPSTREAM, "start": "on-first-use"},
        }
        path = write_file(tmp_path, servers)
        with anyio.fail_after(TEST_S):
            async with hub_client(path) as client:
                tools = names(await client.list_tools())  # the lazy server is started by its first use
                assert {"remote__echo", "lazy__echo"} <= tools
                assert text_of(await client.call_tool("remote__echo", {"text": "over http"})) == "over http"
                assert text_of(await client.call_tool("lazy__echo", {"text": "lazy"})) == "lazy"


def test_malformed_and_odd_requests_through_the_aggregate_are_answered_not_dropped(tmp_path: Path) -> None:
    from tests.integrations.gateway.router.test_router_gateway import HANDSHAKE, INITIALIZED, _exchange

    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}})
    call = {"jsonrpc": "2.0", "method": "tools/call"}
    lines: list[dict[str, Any] | str] = [
        HANDSHAKE,
        INITIALIZED,
        '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"alpha__echo","arguments":',  # cut short
        {**call, "id": 3, "params": {"name": 7}},  # not a string
        {**call, "id": 4, "params": {"name": "alpha_echo"}},  # one underscore: no server
        {**call, "id": 5},  # no params
        {"jsonrpc": "2.0", "id": 6, "method": "resources/read", "params": {"uri": "memo://greeting"}},  # no prefix
        {"jsonrpc": "2.0", "id": 7, "method": "completion/complete", "params": {"ref": "x"}},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"cursor": {"a": 1}}},
        {"jsonrpc": "2.0", "id": 9, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 10, "result": {}},  # an answer to nothing
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
        [{"jsonrpc": "2.0", "id": 11, "method": "ping"}],  # a batch
        {**call, "id": 12, "params": {"name": "alpha__echo", "arguments": {"text": "still here"}}},
    ]
    replies = _exchange(hub_argv(path), [line if not isinstance(line, list) else json.dumps(line) for line in lines],
                        [1, 2, 3, 4, 5, 6, 7, 8, 9, 12])  # fmt: skip
    assert (
        replies[3]["error"]["code"] == INVALID_PARAMS and replies[4]["error"]["message"] == "Unknown tool: alpha_echo"
    )
    assert replies[5]["error"]["code"] == INVALID_PARAMS
    assert replies[6]["error"] == {"code": INVALID_PARAMS, "message": "Resource not found: memo://greeting",
                                   "data": {"uri": "memo://greeting"}}  # fmt: skip
    assert replies[7]["error"]["code"] == INVALID_PARAMS and replies[8]["error"]["message"] == "Invalid cursor"
    assert replies[9]["error"]["code"] == -32601
    assert replies[12]["result"]["content"][0]["text"] == "still here"


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_server_past_its_restart_bound_comes_back_as_a_new_process_announced_by_list_changed(
    tmp_path: Path,
) -> None:
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM}, "beta": {"command": UPSTREAM}})
    recorder = Recorder()
    with anyio.fail_after(TEST_S):
        async with hub_client(path, "--max-upstream-restarts", "1", message_handler=recorder.on_message) as client:
            await client.subscribe_resource(f"alpha+{GREETING_URI}")
            await client.set_logging_level("error")
            for _ in range(2):  # the second death within a minute is past the bound: the leg is down
                with pytest.raises(MCPError):
                    await client.call_tool("alpha__crash", {})
                with anyio.fail_after(20):
                    while True:
                        try:
                            await client.call_tool("alpha__echo", {"text": "up?"})
                            break
                        except MCPError as exc:
                            assert exc.error.data["server"] == "alpha"
                            await anyio.sleep(0.05)
            await recorder.notified(types.ToolListChangedNotification)  # the new process: clients re-list
            assert "alpha__echo" in names(await client.list_tools())
            renewed = await stats(client, "alpha")  # what the session had asked, asked of the new process
            assert GREETING_URI in renewed["subscribed"] and renewed["level"] == "error"
            assert text_of(await client.call_tool("beta__echo", {"text": "b"})) == "b"


async def test_within_a_server_its_own_policy_decides_per_role_which_tools_a_session_sees(tmp_path: Path) -> None:
    policy = tmp_path / "alpha-policy.yaml"
    policy.write_text(
        "name: interns-limited\nextends: open\nrules:\n"
        "  - name: no-crash-for-interns\n    match: {roles: [intern]}\n    deny_tools: [crash, sleep]\n"
    )
    path = write_file(tmp_path, {"alpha": {"command": UPSTREAM, "policy": str(policy)}, "beta": {"command": UPSTREAM}})
    with anyio.fail_after(TEST_S):
        async with hub_client(path, "--role", "intern") as client:
            tools = names(await client.list_tools())
            assert "alpha__echo" in tools and "alpha__crash" not in tools and "alpha__sleep" not in tools
            assert "beta__crash" in tools  # another server, another policy
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("alpha__crash", {})
            assert hidden.value.error.message == "Unknown tool: alpha__crash"  # hidden equals missing
