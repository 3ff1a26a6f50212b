"""`mcp-interceptors proxy --config FILE [--server NAME]`: the gateway file on the command line.

With `--server NAME` it is today's gateway for that one server (its command or URL, env, policy and chain
from the file; every other `proxy` flag as usual). Without it, every server behind one aggregated endpoint
(stdio, or `--listen` with `/servers/NAME/mcp` beside `/mcp`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from interceptors.loops import LoopUnavailableError, run_on_loop, wants_uvloop

from .config import GatewayFileError, load_gateway_file


def hub_proxy(args: argparse.Namespace, proxy: Any) -> int:
    """Run `proxy --config`; `proxy` is the single-upstream command (for `--server`)."""
    try:
        wants_uvloop(args.loop)  # `--loop uvloop` where uvloop cannot run: refused before anything starts
        gateway = load_gateway_file(args.config)
        extra = [a for a in args.upstream if a != "--"]
        if extra or getattr(args, "upstream_url", None) is not None:
            raise GatewayFileError("--config names the servers: give no upstream command after -- and no --upstream")
        if args.server is not None:
            spec = gateway.server(args.server)
    except (GatewayFileError, LoopUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.server is not None:
        args.config = args.server = None
        if spec.url is not None:
            args.upstream_url = spec.url
            args.upstream_header = [f"{name}: {value}" for name, value in spec.headers] + list(
                args.upstream_header or ()
            )
        else:
            args.upstream = ["--", *spec.command]
            args.upstream_env = spec.env
            args.upstream_cwd = spec.cwd
        args.policy = args.policy or spec.policy or gateway.policy
        args.chain = args.chain or spec.chain
        args.audit_log = args.audit_log or gateway.audit_log
        if spec.timeout is not None:
            args.upstream_timeout = spec.timeout
        return int(proxy(args))
    return _aggregate(args, gateway)


def _aggregate(args: argparse.Namespace, gateway: Any) -> int:
    from ..cli import _UsageError, parse_listen, read_tokens_file
    from ..downstream_http import ListenError, listening_socket
    from ..http_sessions import HttpSettings
    from .legs import HubSettings
    from .serve import Hub, announce

    try:
        if args.chain is not None:
            raise _UsageError("with --config each server's chain is its 'chain' key in the file (or use --server)")
        if args.policy is not None:
            gateway = _with_policy(gateway, args.policy)
        tokens = read_tokens_file(args.tokens) if args.tokens is not None else None
        listen = None
        if args.listen is not None:
            listen = parse_listen(args.listen, authenticated=tokens is not None)
            if args.role:
                raise _UsageError("--role is for stdio: over HTTP each client's roles come from its entry in --tokens")
        elif tokens is not None:
            raise _UsageError("--tokens authenticates HTTP clients: use it with --listen")
        _check_policies(gateway)
        restarts = getattr(args, "max_upstream_restarts", None)
        if restarts is not None and restarts < 1:
            raise _UsageError("--max-upstream-restarts must be at least 1")
    except (_UsageError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from interceptors.policy import principal_for_stdio

    http_settings = None
    if listen is not None:
        quota = args.max_sessions_per_principal
        idle = args.session_idle_timeout
        http_settings = HttpSettings(
            **({"max_sessions_per_principal": quota} if quota else {}), **({"idle_timeout_s": idle} if idle else {})
        )
    settings = HubSettings(
        listen=listen is not None,
        tokens=tokens,
        default_principal=None if tokens is not None else principal_for_stdio([]),
        http_settings=http_settings,
        audit_log=args.audit_log or gateway.audit_log,
        redis=args.vault_redis,
        max_restarts=restarts or 5,
        default_timeout=args.upstream_timeout or None,
    )
    hub = Hub(gateway, settings)

    async def main() -> int:
        if listen is None:
            return await hub.run_stdio(principal_for_stdio(list(args.role or ())))
        try:
            sock = listening_socket(*listen)
        except ListenError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        try:
            return await hub.run_http(sock, lambda host, port: announce(host, port, tokens, hub.legs))
        finally:
            sock.close()

    try:
        return run_on_loop(main, loop=args.loop)
    except KeyboardInterrupt:
        return 130


def _with_policy(gateway: Any, policy: str) -> Any:
    """`--policy` with `--config`: the policy of every server the file gives none."""
    from dataclasses import replace

    return replace(gateway, policy=policy)


def _check_policies(gateway: Any) -> None:
    """Every server's policy and chain file, read before anything starts: a mistake is a one-line refusal
    naming the server (exit 2), never a server that stays down."""
    from interceptors.policy import load_policy

    from ...chain_file import load_chain_file

    for spec in gateway.servers:
        policy = spec.policy or gateway.policy or "standard"
        try:
            if policy.lower() != "none":
                load_policy(policy)
            if spec.chain is not None:
                load_chain_file(spec.chain)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{gateway.source}: server {spec.name!r}: {exc}") from None
