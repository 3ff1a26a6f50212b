"""A real upstream that resolves paths the lax way and transforms what it is given: the attacker's view.

- `file:///{+path}`: decodes until stable, takes backslashes for slashes, resolves dot segments, drops trailing
  dots and spaces and anything after a NUL, ignores the query and fragment, then serves the file it names;
  `/srv/secret.txt` holds `SECRET_CONTENT`.
- `whoami` answers the owner's e-mail; `echo_value` says whether it got the real one; `encode_value` echoes
  what it got in another spelling (base64, hex, percent, JSON escapes, HTML entities, reversed, spaced);
  `echo_keys` lists its argument names.

python -m tests.servers.files_server
"""

from __future__ import annotations

import base64
import json
import posixpath
from typing import Any
from urllib.parse import unquote

import anyio
from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

OWNER_EMAIL = "ada.lovelace@analytical-example.org"
SECRET_CONTENT = "the launch codes are 0000"
FILES = {"/srv/secret.txt": SECRET_CONTENT, "/srv/public.txt": "nothing to see", "/etc/shadow": SECRET_CONTENT}


def resolve(uri: str) -> str:
    rest = uri[len("file:") :] if uri.lower().startswith("file:") else uri
    for _ in range(5):
        rest = unquote(rest, errors="replace")
    rest = rest.split("\x00", 1)[0].split("#", 1)[0].split("?", 1)[0].replace("\\", "/")
    if rest.lower().startswith("//localhost/"):
        rest = rest[len("//localhost") :]
    path = posixpath.normpath("/" + rest.lstrip("/"))
    return "/".join(part.rstrip(". ") for part in path.split("/"))


def spell(value: str, how: str) -> str:
    text = f"got {value}"
    if how == "base64":
        return base64.b64encode(text.encode()).decode()
    if how == "base64url":
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")
    if how == "hex":
        return text.encode().hex()
    if how == "percent":
        return "".join(f"%{byte:02X}" for byte in text.encode())
    if how == "json":
        return json.dumps(text).replace("@", "\\u0040").replace(".", "\\u002e")
    if how == "html":
        return "".join(f"&#{ord(c)};" for c in text)
    if how == "reversed":
        return text[::-1]
    if how == "spaced":
        return " ".join(text)
    if how == "upper":
        return text.upper()
    return text


def _tool(name: str) -> types.Tool:
    return types.Tool(
        name=name,
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(readOnlyHint=True, openWorldHint=False),
    )


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[_tool(n) for n in ("whoami", "echo_value", "encode_value", "echo_keys")])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "whoami":
        text = f"owner: {OWNER_EMAIL}"
    elif params.name == "echo_value":
        value = str(arguments.get("value"))
        text = f"got {value} real={'yes' if value == OWNER_EMAIL else 'no'}"
    elif params.name == "encode_value":
        text = spell(str(arguments.get("value")), str(arguments.get("how")))
    elif params.name == "echo_keys":
        text = "keys: " + ", ".join(sorted(arguments))
    else:
        raise MCPError(-32602, f"Unknown tool: {params.name}")
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri="file:///srv/public.txt", name="public")])


async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[types.ResourceTemplate(uri_template="file:///{+path}", name="files")]
    )


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    content = FILES.get(resolve(uri))
    if content is None:
        raise MCPError(-32002, "Resource not found")
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=content)])


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="summary")])


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    text = "Summarise the files."
    return types.GetPromptResult(
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))]
    )


def build_server() -> Server[Any]:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Server("files", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool,
                      on_list_resources=list_resources, on_list_resource_templates=list_templates,
                      on_read_resource=read_resource, on_list_prompts=list_prompts,
                      on_get_prompt=get_prompt)  # fmt: skip


async def main() -> None:
    from mcp.server.stdio import stdio_server

    server = build_server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
