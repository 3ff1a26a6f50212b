"""A registry to serve with `mcp-interceptors serve --registry examples.hello_registry:registry`."""

from __future__ import annotations

from typing import Any

from interceptors import Invocation, Mutation, Registry, Verdict

registry = Registry()


@registry.validator("hello/require-arguments", events="tools/call", phase="request",
                    description="A tool call must carry an arguments object.")  # fmt: skip
async def require_arguments(invocation: Invocation) -> Verdict:
    params = invocation.payload.get("params") if isinstance(invocation.payload, dict) else None
    if not isinstance(params, dict) or not isinstance(params.get("arguments"), dict):
        return Verdict.deny("arguments are required", path="params.arguments")
    return Verdict.allow()


@registry.mutator("hello/trim-text", events="tools/call", phase="response", priority=10,
                  description="Strips surrounding whitespace from text content.")  # fmt: skip
async def trim_text(invocation: Invocation) -> Any:
    result = invocation.payload
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return Mutation.unchanged()
    trimmed = [
        {**block, "text": block["text"].strip()} if isinstance(block, dict) and block.get("type") == "text" else block
        for block in content
    ]
    return Mutation({**result, "content": trimmed})
