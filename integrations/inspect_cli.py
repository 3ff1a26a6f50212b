"""`mcp-interceptors serve | list | invoke`: run an interceptor server, or inspect any from the shell."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from interceptors import INVOKE_METHOD, LIST_METHOD, InterceptorInfo, WireError
from interceptors_chain import SessionConnection


def serve(args: argparse.Namespace) -> int:
    from interceptors_server.serving import (
        RegistryLoadError,
        build_server,
        load_registry,
        serve_http,
        serve_stdio,
    )

    try:
        registries = [load_registry(spec) for spec in args.registry or ()]
    except RegistryLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not registries:
        print("error: nothing to serve: give at least one --registry module:attr", file=sys.stderr)
        return 2
    try:
        server = build_server(registries)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit():
            print("error: --http takes HOST:PORT", file=sys.stderr)
            return 2
        anyio.run(serve_http, server, host, int(port))
    else:
        anyio.run(serve_stdio, server)
    return 0


@asynccontextmanager
async def connect(target: str) -> AsyncIterator[SessionConnection]:
    """A URL means Streamable HTTP; anything else is a command line started over stdio."""
    if target.startswith(("http://", "https://")):
        client = Client(target)
    else:
        argv = shlex.split(target)
        if not argv:
            raise ValueError("--server needs a URL or a command")
        client = Client(StdioServerParameters(command=argv[0], args=argv[1:]))
    async with client:
        yield SessionConnection(client.session)


def _print_error(exc: MCPError) -> None:
    print(f"error {exc.error.code}: {exc.error.message}", file=sys.stderr)
    if exc.error.data is not None:
        print(json.dumps(exc.error.data, indent=2), file=sys.stderr)


def _first_leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _run(main: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any] | int:
    """Run one request; every failure becomes a one-line error and exit code 1, never a traceback."""
    try:
        return anyio.run(main)
    except (Exception, BaseExceptionGroup) as exc:
        leaf = _first_leaf(exc)
        if isinstance(leaf, MCPError) and leaf.error.code != CONNECTION_CLOSED:
            _print_error(leaf)
        elif isinstance(leaf, MCPError | OSError | anyio.BrokenResourceError | anyio.ClosedResourceError):
            print(f"error: could not talk to the server ({type(leaf).__name__}: {leaf})", file=sys.stderr)
        else:
            print(f"error: {type(leaf).__name__}: {leaf}", file=sys.stderr)
        return 1


def list_interceptors(args: argparse.Namespace) -> int:
    async def main() -> dict[str, Any]:
        async with connect(args.server) as connection:
            params = {} if args.event is None else {"event": args.event}
            return await connection.request(LIST_METHOD, params, args.timeout)

    listed = _run(main)
    if isinstance(listed, int):
        return listed
    if args.json:
        print(json.dumps(listed, indent=2))
        return 0
    for raw in listed.get("interceptors", []):
        try:
            info = InterceptorInfo.from_wire(raw)
        except WireError as exc:
            print(f"  (unreadable descriptor: {exc})")
            continue
        hooks = "; ".join(f"{','.join(h.events)} @{h.phase}" for h in info.hooks)
        extras = [f"mode={info.mode}" if info.mode != "active" else "", "failOpen" if info.fail_open else ""]
        if not info.priority_hint.is_default:
            extras.append(f"priority={json.dumps(info.priority_hint.to_wire())}")
        tail = " ".join(e for e in extras if e)
        print(f"{info.name}  {info.type}  {hooks}{'  ' + tail if tail else ''}")
        if info.description:
            print(f"    {info.description}")
    return 0


def invoke_interceptor(args: argparse.Namespace) -> int:
    try:
        payload = json.loads(args.payload)
        config = None if args.config is None else json.loads(args.config)
    except json.JSONDecodeError as exc:
        print(f"error: --payload/--config is not JSON: {exc.msg} at {exc.pos}", file=sys.stderr)
        return 2
    params: dict[str, Any] = {"name": args.name, "event": args.event, "phase": args.phase, "payload": payload}
    if config is not None:
        params["config"] = config
    if args.timeout_ms is not None:
        params["timeoutMs"] = args.timeout_ms

    async def main() -> dict[str, Any]:
        async with connect(args.server) as connection:
            return await connection.request(INVOKE_METHOD, params, args.timeout)

    result = _run(main)
    if isinstance(result, int):
        return result
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return 0


def add_commands(sub: Any) -> None:
    serve_parser = sub.add_parser("serve", help="serve interceptor registries over stdio or Streamable HTTP")
    serve_parser.add_argument("--registry", action="append", metavar="MODULE:ATTR",
                              help="a Registry (or a callable returning one); repeatable")  # fmt: skip
    serve_parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at /mcp instead of stdio")
    serve_parser.set_defaults(func=serve)

    for name, func, helptext in (
        ("list", list_interceptors, "list the interceptors of a server"),
        ("invoke", invoke_interceptor, "invoke one interceptor of a server"),
    ):
        parser = sub.add_parser(name, help=helptext)
        parser.add_argument("--server", required=True, help="a URL (Streamable HTTP) or a command (stdio)")
        parser.add_argument("--json", action="store_true", help="print the raw JSON result")
        parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the answer")
        if name == "list":
            parser.add_argument("--event", help="only interceptors hooking this event")
        else:
            parser.add_argument("name", help="interceptor name")
            parser.add_argument("--event", required=True)
            parser.add_argument("--phase", required=True, choices=("request", "response"))
            parser.add_argument("--payload", required=True, help="the payload as JSON")
            parser.add_argument("--config", help="per-interceptor config as JSON")
            parser.add_argument("--timeout-ms", type=int, help="timeoutMs sent to the host")
        parser.set_defaults(func=func)
