"""`mcp-interceptors proxy [--chain FILE] [--registry M:A ...] [--listen HOST:PORT] [--expose-interceptors] -- CMD`.

Exit status: 2 for bad input (one `error:` line on stderr), 1 when the upstream cannot be started or goes
away, 0 when the client leaves or a signal stops the gateway. Protocol data only ever goes to stdout.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

import anyio
from mcp import StdioServerParameters

from interceptors import Registry
from interceptors_chain.failures import describe

DEFAULT_MAX_LINE_MIB = 64
DEFAULT_UPSTREAM_TIMEOUT_S = 300.0


class _UsageError(ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


def parse_listen(value: str) -> tuple[str, int]:
    """HOST:PORT on a loopback address: the HTTP endpoint has no authentication of its own."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise _UsageError("--listen takes HOST:PORT, e.g. 127.0.0.1:8765 (port 0 picks a free one)")
    if host == "localhost":
        host = "127.0.0.1"
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise _UsageError(f"--listen serves without authentication, so only loopback hosts are allowed, not {host!r}")
    return host, int(port)


def upstream_params(command: Sequence[str]) -> StdioServerParameters:
    """The upstream command; it inherits the gateway's environment, as if it had been started directly."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise _UsageError("give the upstream server command after --, e.g. proxy -- python server.py")
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def proxy(args: argparse.Namespace) -> int:
    """Run the gateway for the parsed `proxy` arguments; returns the exit status."""
    from interceptors_chain import Chain, DiscoveryError
    from interceptors_server.serving import RegistryLoadError, load_registry

    from .gateway_legacy import Gateway, ListenError
    from .gateway_policy import bearer_principal, build_stages, context_from, require_bearer, stdio_principal
    from .gateway_upstream import UpstreamError

    upstream_url = getattr(args, "upstream_url", None)
    try:
        if upstream_url is not None and [a for a in args.upstream if a != "--"]:
            raise _UsageError("give either --upstream URL or an upstream command after --, not both")
        params = upstream_params(args.upstream) if upstream_url is None else None
        listen = None if args.listen is None else parse_listen(args.listen)
        registries = [load_registry(spec) for spec in args.registry or ()]
        chain_file = None
        if args.chain is not None:
            from .chain_file import load_chain_file

            chain_file = load_chain_file(args.chain)
        if args.tokens is not None and listen is None:
            raise _UsageError("--tokens authenticates HTTP clients: use it with --listen")
        tokens = None
        if args.tokens is not None:
            from interceptors.policy import BearerTokens

            try:
                tokens = BearerTokens.from_file(args.tokens)
            except OSError as exc:
                raise _UsageError(f"cannot read --tokens file: {exc.strerror}") from None
        if tokens is None and chain_file is not None and chain_file.tokens is not None:
            if listen is None:
                raise _UsageError("the chain file's tokens authenticate HTTP clients: use --listen")
            from interceptors.policy import BearerTokens

            tokens = BearerTokens.from_entries(chain_file.tokens, args.chain)
        if listen is not None and args.role:  # over HTTP, roles come only from bearer tokens
            if tokens is None:
                raise _UsageError(
                    "--role gives the local user's roles, and over HTTP (--listen) every client would get them, "
                    "anonymous ones included: give HTTP clients their roles with --tokens FILE instead"
                )
            raise _UsageError("--role is for stdio: over HTTP each client's roles come from its entry in --tokens")
        quota, idle = getattr(args, "max_sessions_per_principal", None), getattr(args, "session_idle_timeout", None)
        if quota is not None and quota < 1:
            raise _UsageError("--max-sessions-per-principal must be at least 1")
        if idle is not None and idle <= 0:
            raise _UsageError("--session-idle-timeout must be a positive number of seconds")
        if getattr(args, "upstream_timeout", None) is not None and not args.upstream_timeout >= 0:
            raise _UsageError("--upstream-timeout takes a number of seconds (0: no limit)")
        if args.max_line_mib is not None and args.max_line_mib < 1:
            raise _UsageError("--max-line-mib must be at least 1")
        max_line_bytes = (args.max_line_mib or DEFAULT_MAX_LINE_MIB) << 20
        policy = args.policy or (chain_file.policy if chain_file is not None else None) or "standard"
        stages = build_stages(policy, args.audit_log, args.vault_redis, multi_principal=tokens is not None)
        exposed: list[Registry] | None = None
        if args.expose_interceptors:
            # The user's own registries only (chain-file servers when they are in-process registries): the
            # built-in stages act for the gateway, on its principal's behalf, and an `interceptor/invoke` from
            # a client carries the client's own context (`vault/depseudonymize` would hand back real values).
            local = [s.registry for s in chain_file.servers if s.registry is not None] if chain_file else []
            exposed = [*registries, *(load_registry(spec) for spec in local)]
        registries = [*stages.registries, *registries]
    except (_UsageError, RegistryLoadError, ValueError, OSError) as exc:  # ValueError: Chain file or policy errors
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if getattr(args, "router", False) or os.environ.get("MCP_INTERCEPTORS_ROUTER") == "1":
        from .gateway.command import RouterOptions, run_router
        from .gateway.upstream_http import upstream_headers

        try:
            headers = upstream_headers(getattr(args, "upstream_header", None))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return run_router(
            RouterOptions(
                [params.command, *params.args] if params else [], params.env if params else None, chain_file,
                registries, stages, listen, tokens, args.role or (), exposed, bool(getattr(args, "verbose", 0)),
                extra={"metrics": args.metrics, "max_sessions_per_principal": quota, "session_idle_s": idle,
                       "reload": getattr(args, "reload", False), "policy": args.policy, "chain_path": args.chain,
                       "audit_log": args.audit_log, "redis": args.vault_redis, "multi_principal": tokens is not None},
                upstream_url=upstream_url, upstream_headers=headers,
                upstream_timeout=(getattr(args, "upstream_timeout", None) or None), max_line_bytes=max_line_bytes,
            )
        )  # fmt: skip
    if params is None:
        print("error: --upstream URL is served by the router gateway: add --router", file=sys.stderr)
        return 2

    def listening(host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        print(f"mcp-interceptors proxy: listening on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)

    async def main() -> int:
        async with AsyncExitStack() as stack:
            if chain_file is not None:
                from .chain_file import open_chain

                chain = await stack.enter_async_context(
                    open_chain(chain_file, registries, max_payload_bytes=max_line_bytes)
                )
            elif registries:
                from interceptors_server import LocalChain

                chain = await stack.enter_async_context(LocalChain(*registries, max_payload_bytes=max_line_bytes))
            else:
                chain = Chain()
            principals = bearer_principal(tokens) if tokens is not None else stdio_principal(args.role or ())
            guard = None if tokens is None else (lambda app: require_bearer(app, tokens))
            stack.callback(stages.close)  # the vault saves its mappings at shutdown (when it has a path)
            async with Gateway(
                params,
                chain,
                expose=exposed,
                context_provider=context_from(principals),
                http_guard=guard,
                local_tools=stages.local_tools,
                authorize_local=stages.authorize,
                restart_upstream=listen is not None if args.restart_upstream is None else args.restart_upstream,
                max_line_bytes=max_line_bytes,
            ) as gateway:

                async def primed_again(upstream: Any) -> None:
                    await stages.prime(upstream.request, upstream.capabilities)

                gateway.on_upstream_restart = primed_again
                await stages.prime(gateway.upstream.request, gateway.upstream.capabilities)
                code = await gateway.run(listen, listening, handle_signals=True)
            if code:
                logging.getLogger("interceptors.gateway").error("the upstream server closed the connection")
            return code

    try:
        return anyio.run(main)
    except KeyboardInterrupt:
        return 130
    except (Exception, BaseExceptionGroup) as exc:
        leaf = _leaf(exc)
        if isinstance(leaf, UpstreamError | ListenError | DiscoveryError):
            print(f"error: {leaf}", file=sys.stderr)
            return 1
        if isinstance(leaf, ValueError):  # a chain file's server could not be loaded
            print(f"error: {leaf}", file=sys.stderr)
            return 2
        print(f"error: {describe(leaf)}", file=sys.stderr)
        return 1


def add_proxy_command(sub: Any) -> None:
    """Register `proxy` on the CLI's subparsers (`add_proxy_command(parser.add_subparsers(...))`)."""
    parser = sub.add_parser(
        "proxy",
        help="run an MCP server behind the interceptor chain (a gateway)",
        description="Start CMD as the upstream MCP server (stdio) and serve it, behind the interceptor chain, "
        "on stdio or on Streamable HTTP (--listen).",
        usage="mcp-interceptors proxy [--policy NAME|FILE] [--chain FILE] [--registry MODULE:ATTR ...] "
        "[--listen HOST:PORT [--tokens FILE]] [--role ROLE ...] [--audit-log FILE] [--expose-interceptors] "
        "(-- CMD [ARGS...] | --router --upstream URL [--upstream-header 'NAME: VALUE' ...])",
    )
    parser.add_argument("--chain", metavar="FILE", help="a chain file (YAML or JSON) naming interceptor servers")
    parser.add_argument(
        "--registry", action="append", metavar="MODULE:ATTR", help="an interceptor Registry (or a factory); repeatable"
    )
    parser.add_argument("--listen", metavar="HOST:PORT", help="serve Streamable HTTP at http://HOST:PORT/mcp")
    parser.add_argument(
        "--policy",
        default=None,
        metavar="NAME|FILE",
        help="the built-in policy and transform stages: a profile (open, standard, strict, read_only, airgapped, "
        "audit, soc-analyst) or a policy file; 'none' for a pure pass-through (default: the chain file's "
        "policy, else standard)",
    )
    parser.add_argument(
        "--role", action="append", metavar="ROLE", help="a role of the local user, on stdio only; repeatable"
    )
    parser.add_argument("--audit-log", metavar="FILE", help="append the policy's audit records to this JSONL file")
    parser.add_argument("--tokens", metavar="FILE", help="bearer tokens for HTTP clients (token -> id, roles)")
    parser.add_argument(
        "--redis",
        "--vault-redis",
        dest="vault_redis",
        metavar="URL",
        help="share the pseudonym vault and the rate limits through Redis (several gateway processes); "
        "--vault-redis is the old name",
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve GET /metrics (Prometheus) and GET /healthz at HOST:PORT (--router)",
    )
    parser.add_argument(
        "--expose-interceptors",
        action="store_true",
        help="also answer interceptors/list and interceptor/invoke for the in-process registries",
    )
    parser.add_argument(
        "--restart-upstream",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="restart the upstream when it dies (capped backoff) instead of exiting with status 1 "
        "(default: yes with --listen, no on stdio)",
    )
    parser.add_argument(
        "--max-line-mib",
        type=int,
        metavar="N",
        help=f"the longest message line read from the upstream or the client (default: {DEFAULT_MAX_LINE_MIB})",
    )
    parser.add_argument(
        "--max-sessions-per-principal",
        type=int,
        metavar="N",
        help="with --router --listen: open HTTP sessions one principal may hold (default: 256)",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="with --router --listen: close an HTTP session idle this long (default: 1800)",
    )
    parser.add_argument(
        "--router", action="store_true", help="use the message-router gateway (also MCP_INTERCEPTORS_ROUTER=1)"
    )
    parser.add_argument(
        "--upstream",
        dest="upstream_url",
        metavar="URL",
        help="a remote upstream server over Streamable HTTP instead of a command (with --router)",
    )
    parser.add_argument(
        "--upstream-header",
        action="append",
        metavar="'NAME: VALUE'",
        help="an HTTP header sent to the --upstream server (e.g. its Authorization); repeatable",
    )
    parser.add_argument(
        "--upstream-timeout",
        type=float,
        default=DEFAULT_UPSTREAM_TIMEOUT_S,
        metavar="SECONDS",
        help="how long a request may wait for the upstream's answer before the client gets an error and the "
        f"upstream a cancellation (with --router; default: {DEFAULT_UPSTREAM_TIMEOUT_S:g}; 0: no limit)",
    )
    # Operations (issue 18): hot reload.
    parser.add_argument(
        "--reload",
        action="store_true",
        help="with --router: reload the policy and chain files when they change (SIGHUP always reloads them)",
    )
    parser.add_argument("upstream", nargs=argparse.REMAINDER, help="-- then the upstream server command")
    parser.set_defaults(func=proxy)
