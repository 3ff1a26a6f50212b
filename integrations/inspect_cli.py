"""`mcp-interceptors serve | list | invoke`: run an interceptor server, or inspect any from the shell.

Exit status of `list` and `invoke`: 0 success; 1 the request failed (the server could not be started or
reached, timed out, answered an error) or, for `invoke`, the validator rejected the payload (`valid: false`,
the result is still printed); 2 bad input; 130 interrupted. `serve`: 0 when the client leaves (stdin at
end of file) or on SIGINT or SIGTERM; 2 bad input (stdin or stdout closed, over stdio, too).
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from interceptors.loops import LOOPS

if TYPE_CHECKING:  # the SDK and the chain load when a command runs, not for `--help` or `--version`
    from mcp.shared.exceptions import MCPError

    from interceptors_chain import SessionConnection

    from .quick_stdio import QuickConnection

logger = logging.getLogger("interceptors.cli")

DEFAULT_TIMEOUT_S = 10.0
STOP_GRACE_S = 0.3
"""The server of `list`/`invoke` gets this long to exit after its stdin closes, then again after SIGTERM: the
command exits within its --timeout plus about a second, whatever the server does."""
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def serve(args: argparse.Namespace) -> int:
    """Serve registries, the built-in stages (`--policy`, the default when no registry is given), or both."""
    from interceptors.loops import LoopUnavailableError, run_on_loop, wants_uvloop

    try:
        wants_uvloop(args.loop)
    except LoopUnavailableError as exc:  # before the SDK loads: a refusal at start is prompt
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from interceptors_server.serving import RegistryLoadError, build_server, load_registry, serve_http, serve_stdio

    from .gateway.stages import build_stages

    try:
        registries = [load_registry(spec) for spec in args.registry or ()]
    except RegistryLoadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    policy = args.policy if args.policy is not None else (None if registries else "standard")
    if policy is not None:
        try:
            stages = build_stages(policy, None)
        except (ValueError, OSError) as exc:  # an unknown profile, an invalid or unreadable policy file
            print(f"error: --policy: {exc}", file=sys.stderr)
            return 2
        registries = [*stages.registries, *registries]
    if not registries:
        print("error: nothing to serve: --policy none and no --registry module:attr", file=sys.stderr)
        return 2
    try:
        server = build_server(registries)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _stop_on_sigterm()
    if args.http:
        host, _, port = args.http.rpartition(":")
        if not host or not port.isdigit():
            print("error: --http takes HOST:PORT", file=sys.stderr)
            return 2

        def listening(bound_host: str, bound_port: int) -> None:
            print(f"mcp-interceptors serve: listening on http://{bound_host}:{bound_port}/mcp", file=sys.stderr,
                  flush=True)  # fmt: skip

        try:
            run_on_loop(serve_http, server, host, int(port), listening, loop=args.loop)
        except OSError as exc:
            print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            return 0
    else:
        if sys.stdin is None or sys.stdout is None:  # fd 0 or 1 closed: no client can be there
            print("error: serve speaks MCP on stdin and stdout, and one of them is closed: start it with a "
                  "client's pipes, or use serve --http HOST:PORT", file=sys.stderr)  # fmt: skip
            return 2
        try:
            run_on_loop(serve_stdio, server, loop=args.loop)
        except KeyboardInterrupt:
            return 0
    return 0


def _stop_on_sigterm() -> None:
    """SIGTERM stops `serve` as SIGINT does, with status 0: uvicorn hands the signal back to the process once
    it has shut down, and the default action would end it with 143."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


@asynccontextmanager
async def connect(target: str) -> AsyncIterator[SessionConnection | QuickConnection]:
    """A URL means Streamable HTTP; anything else is a command line started over stdio (its own process group,
    stopped and reaped however we leave: an answer, an error, a timeout or an interrupt). A stdio server of the
    2026 era is asked without loading the MCP SDK (`quick_stdio`: most of a command's time was the SDK's
    import); any other is asked again through the SDK."""
    from interceptors.errors import leaf

    from .quick_stdio import JUNK_LIMIT, NotQuick, quick_connection

    if not target.startswith(("http://", "https://")):
        argv = shlex.split(target)
        if not argv:
            raise ValueError("--server needs a URL or a command")
        who = f"the server {server_name(argv)!r}"
        try:
            async with quick_connection(argv, who, sys.stderr, stop_grace_s=STOP_GRACE_S) as quick:
                yield quick
                return
        except NotQuick as why:
            logger.debug("%s: asked through the SDK (%s)", who, why)

    from mcp import Client, StdioServerParameters
    from mcp.shared.exceptions import MCPError

    from interceptors_chain import SessionConnection
    from interceptors_chain.failures import ConnectionLost, InvokerFailure
    from interceptors_chain.stdio_pipe import express_capable, open_stdio_pipe

    if target.startswith(("http://", "https://")):
        async with Client(target) as client:
            yield SessionConnection(client.session, who=f"the server at {_safe_url(target)}")
        return
    parameters = StdioServerParameters(command=argv[0], args=argv[1:])
    closed = anyio.Event()
    pipe_options: dict[str, Any] = {"who": who, "junk_limit": JUNK_LIMIT, "stop_grace_s": STOP_GRACE_S}
    async with open_stdio_pipe(parameters, sys.stderr, closed.set, **pipe_options) as pipe:
        try:
            async with Client(pipe.transport()) as client:
                express = pipe.request if express_capable(client.session) else None
                yield SessionConnection(client.session, express, closed=lambda: pipe.closed, who=who)
        except (MCPError, BaseExceptionGroup) as exc:  # the handshake's requests: a closed pipe is no answer
            found = leaf(exc)
            if pipe.closed and isinstance(found, MCPError) and not isinstance(found, InvokerFailure):
                raise ConnectionLost(who) from None
            raise


def server_name(argv: list[str]) -> str:
    """The server as its command line shows it, shortened: what names it in every error."""
    text = shlex.join(argv)
    return text if len(text) <= 80 else text[:77] + "..."


def _safe_url(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"


def _print_error(exc: MCPError) -> None:
    print(f"error {exc.error.code}: {exc.error.message}", file=sys.stderr)
    if exc.error.data is not None:
        print(json.dumps(exc.error.data, indent=2), file=sys.stderr)


def describe_target(target: str) -> str:
    """`the server 'CMD …'` or `the server at URL`, as errors name it."""
    if target.startswith(("http://", "https://")):
        return f"the server at {_safe_url(target)}"
    try:
        return f"the server {server_name(shlex.split(target))!r}"
    except ValueError:
        return f"the server {target[:80]!r}"


def _run(
    main: Callable[[], Awaitable[dict[str, Any]]],
    timeout_s: float,
    who: str = "the server",
    started: float | None = None,
) -> dict[str, Any] | int:
    """Run one request within `timeout_s` (start, handshake and answer); every failure becomes a one-line
    error and exit code 1, never a traceback. SIGINT and SIGTERM stop it, the server reaped first. The SDK is
    never loaded here for the failures the SDK-free path raises (a malformed reply, a closed connection, a
    timeout)."""
    from interceptors.errors import leaf

    from .quick_stdio import QuickFailure

    async def bounded() -> dict[str, Any] | int:
        async with anyio.create_task_group() as group:

            async def on_signal() -> None:
                # SIGINT too: a KeyboardInterrupt raised at an arbitrary point (under load, mid-cleanup) could
                # leave the server's reaping half done and the command hung; a cancellation is always clean.
                with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                    async for _ in signals:
                        group.cancel_scope.cancel()

            group.start_soon(on_signal)
            try:  # the --timeout counts from the command's start: loading the SDK is part of the wait
                spent = 0.0 if started is None else time.monotonic() - started
                with anyio.fail_after(max(timeout_s - spent, 0.0)):
                    return await main()
            finally:
                group.cancel_scope.cancel()
        return EXIT_INTERRUPTED  # cancelled by SIGINT or SIGTERM

    try:
        return anyio.run(bounded)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (Exception, BaseExceptionGroup) as exc:
        found = leaf(exc)
        if isinstance(found, QuickFailure):  # its message names the server
            for line in found.lines():
                print(line, file=sys.stderr)
        elif isinstance(found, anyio.BrokenResourceError | anyio.ClosedResourceError | anyio.EndOfStream):
            print(f"error: {who} closed the connection", file=sys.stderr)
        elif isinstance(found, TimeoutError):
            print(f"error: {who} did not answer within {timeout_s:g} s (see --timeout)", file=sys.stderr)
        else:
            _print_failure(found, who)
        return EXIT_FAILED


def _print_failure(found: BaseException, who: str) -> None:
    """A failure of the SDK's path (or an OSError): its words, from the invoker's failures (loads the SDK)."""
    from mcp.shared.exceptions import MCPError

    from interceptors_chain.failures import ConnectionLost, describe

    if isinstance(found, ConnectionLost):  # its message names the server
        print(f"error: {found.error.message}", file=sys.stderr)
    elif isinstance(found, MCPError):  # the server's own answer, whatever its code (-32000 is a peer's timeout)
        _print_error(found)
    elif isinstance(found, OSError):
        print(f"error: could not talk to {who}: {describe(found)}", file=sys.stderr)
    else:
        text = describe(found)  # an HTTP failure names the URL itself
        named = who.startswith("the server at ") and who.removeprefix("the server at ") in text
        print(f"error: {text}" if named else f"error: {who}: {text}", file=sys.stderr)
        logger.info("the request failed", exc_info=found)


def list_interceptors(args: argparse.Namespace) -> int:
    started = time.monotonic()
    from interceptors import LIST_METHOD, InterceptorInfo, WireError

    async def main() -> dict[str, Any]:
        async with connect(args.server) as connection:
            params = {} if args.event is None else {"event": args.event}
            return await connection.request(LIST_METHOD, params, args.timeout)

    listed = _run(main, args.timeout, describe_target(args.server), started)
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
    started = time.monotonic()
    from interceptors import INVOKE_METHOD

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

    result = _run(main, args.timeout, describe_target(args.server), started)
    if isinstance(result, int):
        return result
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
    return EXIT_FAILED if result.get("valid") is False else EXIT_OK  # a validator's rejection


def add_commands(sub: Any) -> None:
    serve_parser = sub.add_parser(
        "serve",
        help="serve interceptors over stdio or Streamable HTTP (default: the built-in standard stages)",
        description="Serve interceptor registries and/or the built-in policy and transform stages as an "
        "interceptor server. With no --registry the stages of the standard profile are served.",
    )
    serve_parser.add_argument("--registry", action="append", metavar="MODULE:ATTR",
                              help="a Registry (or a callable returning one); repeatable")  # fmt: skip
    serve_parser.add_argument(
        "--policy",
        metavar="NAME|FILE",
        help="the built-in policy and transform stages: a profile or a policy file; 'none' for no stages "
        "(default: standard when no --registry is given, else none)",
    )
    serve_parser.add_argument("--http", metavar="HOST:PORT", help="serve Streamable HTTP at /mcp instead of stdio")
    serve_parser.add_argument("--loop", choices=LOOPS, default="auto",
                              help="the event loop: uvloop's when installed (auto), or asyncio's")  # fmt: skip
    serve_parser.set_defaults(func=serve)

    for name, func, helptext in (
        ("list", list_interceptors, "list the interceptors of a server"),
        ("invoke", invoke_interceptor, "invoke one interceptor of a server"),
    ):
        parser = sub.add_parser(name, help=helptext)
        parser.add_argument("--server", required=True, help="a URL (Streamable HTTP) or a command (stdio)")
        parser.add_argument("--json", action="store_true", help="print the raw JSON result")
        parser.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_S,
            help=f"seconds to start the server and get the answer (default: {DEFAULT_TIMEOUT_S:g})",
        )
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
