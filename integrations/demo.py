"""`mcp-interceptors demo`: a tool server whose calls pass through a validator and a mutator."""

from __future__ import annotations

import re
import sys
from typing import TextIO

from mcp import Client, types
from mcp.shared.exceptions import MCPError

from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server import LocalChain

from .demo_server import DEMO_KEY_ID, DEMO_TOKEN, demo_tool_server
from .gateway.inprocess import InProcessGateway
from .gateway.stages import build_stages
from .middleware import InterceptorMiddleware

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


def demo_registry() -> Registry:
    """Two example interceptors: a request validator and a response mutator."""
    registry = Registry()

    @registry.validator("demo/no-destructive-tools", events="tools/call", phase="request",
                        description="Refuses tools whose name says they delete things.")  # fmt: skip
    async def no_destructive(invocation: Invocation) -> Verdict:
        name = (invocation.payload.get("params") or {}).get("name", "")
        if str(name).startswith("delete_"):
            return Verdict.deny(f"tool {name} is destructive", path="params.name")
        return Verdict.allow()

    @registry.mutator("demo/redact-emails", events="tools/call", phase="response",
                      description="Replaces e-mail addresses in text content.")  # fmt: skip
    async def redact_emails(invocation: Invocation) -> Mutation:
        result = invocation.payload
        content = result.get("content") or []
        changed = [
            {**block, "text": _EMAIL.sub("[email]", block["text"])} if block.get("type") == "text" else block
            for block in content
        ]
        if changed == content:
            return Mutation.unchanged()
        return Mutation({**result, "content": changed})

    return registry


async def _calls(client: Client, out: TextIO) -> bool:
    """The same two calls on either path; True when the destructive one was blocked."""
    result = await client.call_tool("lookup_owner", {"text": "acme/widgets"})
    text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
    print(f"  call lookup_owner -> {text}", file=out)
    try:
        await client.call_tool("delete_repository", {"text": "acme/widgets"})
    except MCPError as exc:
        print(f"  call delete_repository -> blocked: error {exc.error.code} {exc.error.message}", file=out)
        return True
    print("  call delete_repository -> NOT BLOCKED (unexpected)", file=out)
    return False


async def run_demo(out: TextIO) -> int:
    registry = demo_registry()
    async with LocalChain(registry) as chain:
        print("interceptors:", file=out)
        for server, info in chain.interceptors():
            hooks = ", ".join(f"{'/'.join(h.events)}@{h.phase}" for h in info.hooks)
            print(f"  {info.name} ({info.type}) on {hooks} [server {server}]", file=out)

        print("1. in-process: the tool server runs the chain around its own traffic (middleware)", file=out)
        tools = demo_tool_server()
        tools.middleware.append(InterceptorMiddleware(chain))
        async with Client(tools) as client:
            in_process_blocked = await _calls(client, out)

        print("2. gateway: the same tool server as a separate process, wrapped by `mcp-interceptors proxy`", file=out)
        upstream = [sys.executable, "-m", "integrations.demo_server"]
        async with InProcessGateway(upstream, chain) as gateway, Client(gateway.server, mode="legacy") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            print(f"  tools the client sees: {', '.join(names)}", file=out)
            gateway_blocked = await _calls(client, out)

    print("3. gateway with the default `standard` policy: the same server's leaky tool", file=out)
    stages = build_stages("standard", None)
    async with (
        LocalChain(*stages.registries) as chain,
        InProcessGateway(upstream, chain, stages=stages) as gateway,
        Client(gateway.server, mode="legacy") as client,
    ):
        result = await client.call_tool("deploy_config", {"text": "acme/widgets"})
        text = result.content[0].text if isinstance(result.content[0], types.TextContent) else ""
        print(f"  upstream sent: acme/widgets: DEPLOY_TOKEN={DEMO_TOKEN} ... key_id={DEMO_KEY_ID}", file=out)
        print(f"  client saw:    {text.strip()}", file=out)
        leaked = DEMO_TOKEN in text or DEMO_KEY_ID in text
    return 0 if in_process_blocked and gateway_blocked and not leaked else 1
