"""`mcp-interceptors proxy [--policy NAME|FILE] [--chain FILE] [--registry M:A ...] [--listen HOST:PORT] -- CMD`:
the command line of the gateway (the message router, `command.run_router`).

Exit status: 2 for bad input (one `error:` line on stderr), 1 when the upstream cannot be started or goes
away, 0 when the client leaves or a signal stops the gateway. Protocol data only ever goes to stdout.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import shlex
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interceptors.errors import InterceptorsError
from interceptors.loops import LOOPS, LoopUnavailableError, wants_uvloop

if TYPE_CHECKING:  # the chain and the SDK load only when `proxy` runs: `--help` and `--version` stay fast
    from interceptors import Registry

DEFAULT_MAX_LINE_MIB = 64
DEFAULT_UPSTREAM_TIMEOUT_S = 300.0

logger = logging.getLogger("interceptors.gateway")


class _UsageError(InterceptorsError, ValueError):
    """Bad command-line input: printed as one line, exit status 2."""


def parse_listen(value: str, *, authenticated: bool = False) -> tuple[str, int]:
    """HOST:PORT. Without authentication only a loopback address: anyone who can reach the port could use the
    upstream. With it (`--tokens`, `--auth-issuer`) any IP address, `0.0.0.0` and `::` included."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or int(port) > 65535:
        raise _UsageError("--listen takes HOST:PORT, e.g. 127.0.0.1:8765 (port 0 picks a free one)")
    if host == "localhost":
        host = "127.0.0.1"
    if is_loopback(host):
        return host, int(port)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise _UsageError(f"--listen takes an IP address (127.0.0.1, 0.0.0.0, ::), not the name {host!r}") from None
    if not authenticated:
        raise _UsageError(
            f"--listen {host}: beyond loopback the gateway needs authentication (--tokens FILE, or --auth-issuer URL "
            "--auth-audience AUD): without it anyone who can reach the port could use the upstream"
        )
    return host, int(port)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_tokens_file(path: str) -> Any:
    """`--tokens FILE`: refused when it holds a token in clear and others than its owner may read it (a digest
    or an environment variable's name is no secret); a typo names the key."""
    from interceptors.policy import BearerTokens
    from interceptors.policy.document import parse_text

    try:
        text = Path(path).read_text("utf-8")
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _UsageError(f"cannot read --tokens file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise _UsageError(f"--tokens file {path!r} is not UTF-8 text") from None
    entries = parse_text(text, path, json_only=path.lower().endswith(".json"))
    listed = entries.get("tokens") if isinstance(entries, dict) and set(entries) == {"tokens"} else entries
    clear = isinstance(listed, list) and any(isinstance(entry, dict) and "token" in entry for entry in listed)
    if clear and mode & (stat.S_IRGRP | stat.S_IROTH):
        who = "everyone" if mode & stat.S_IROTH else "its group"
        raise _UsageError(
            f"--tokens file {path!r} holds tokens in clear and {who} may read it: run chmod 600 {shlex.quote(path)} "
            "(or keep token_sha256 digests or token_env names in it instead)"
        )
    return BearerTokens.from_entries(entries, path)


def jwt_verifier(args: argparse.Namespace) -> Any:
    """`--auth-issuer URL --auth-audience AUD [--auth-jwks URL|FILE] [--auth-scope S ...]`, or None."""
    issuer, audience = args.auth_issuer, args.auth_audience
    if issuer is None and audience is None and args.auth_jwks is None:
        return None
    if issuer is None or audience is None:
        raise _UsageError("OAuth needs both --auth-issuer URL and --auth-audience AUD (this gateway's resource URL)")
    if not issuer.startswith(("https://", "http://")):
        raise _UsageError(f"--auth-issuer takes the issuer's URL (its iss claim), not {issuer!r}")
    if args.tokens is not None:
        raise _UsageError("give either --tokens FILE or --auth-issuer URL, not both")
    try:
        import jwt  # noqa: F401
    except ImportError:
        raise _UsageError("--auth-issuer needs PyJWT: pip install 'mcp-interceptors[auth]'") from None
    from .auth import JwtSettings, JwtVerifier

    settings = JwtSettings(
        issuer=issuer,
        audience=audience,
        jwks=args.auth_jwks,
        required_scopes=tuple(args.auth_scope or ()),
        roles_claim=args.auth_roles_claim or "roles",
        resource=args.auth_resource,
    )
    return JwtVerifier(settings)  # ValueError: an unreadable or invalid --auth-jwks file


def upstream_command(command: Sequence[str]) -> list[str]:
    """The upstream command (after `--`); it inherits the gateway's environment, as if started directly."""
    argv = list(command)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise _UsageError("give the upstream server command after --, e.g. proxy -- python server.py")
    return argv


def _upstream_env(args: argparse.Namespace) -> dict[str, str]:
    """The gateway's environment, plus a gateway file's `env` for its server (`--config FILE --server NAME`)."""
    return {**os.environ, **(getattr(args, "upstream_env", None) or {})}


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def proxy(args: argparse.Namespace) -> int:
    """Run the gateway for the parsed `proxy` arguments; returns the exit status."""
    if getattr(args, "config", None) is not None:  # a gateway file (issue 35): integrations/gateway/hub/
        from .hub.cli import hub_proxy

        return hub_proxy(args, proxy)
    if getattr(args, "server", None) is not None:
        print("error: --server NAME picks a server of a gateway file: give --config FILE", file=sys.stderr)
        return 2
    upstream_url = getattr(args, "upstream_url", None)
    quota, idle = args.max_sessions_per_principal, args.session_idle_timeout
    try:  # what the arguments alone decide, before the chain and the SDK load: a typo is answered at once
        if upstream_url is not None and [a for a in args.upstream if a != "--"]:
            raise _UsageError("give either --upstream URL or an upstream command after --, not both")
        command = upstream_command(args.upstream) if upstream_url is None else []
        # a chain file's tokens are known only once it is read: checked again below
        listen = None if args.listen is None else parse_listen(args.listen, authenticated=True)
        if args.listen is not None and args.chain is None and args.tokens is None and args.auth_issuer is None:
            parse_listen(args.listen)
        if args.tokens is not None and listen is None:
            raise _UsageError("--tokens authenticates HTTP clients: use it with --listen")
        if (args.auth_issuer is not None or args.auth_audience is not None) and listen is None:
            raise _UsageError("--auth-issuer authenticates HTTP clients: use it with --listen")
        if quota is not None and quota < 1:
            raise _UsageError("--max-sessions-per-principal must be at least 1")
        if idle is not None and idle <= 0:
            raise _UsageError("--session-idle-timeout must be a positive number of seconds")
        if not args.upstream_timeout >= 0:
            raise _UsageError("--upstream-timeout takes a number of seconds (0: no limit)")
        if args.max_line_mib is not None and args.max_line_mib < 1:
            raise _UsageError("--max-line-mib must be at least 1")
        wants_uvloop(args.loop)  # LoopUnavailableError, a ValueError: `--loop uvloop` where uvloop cannot run
        if args.metrics is not None:
            from ..metrics import metrics_installed, parse_address

            try:
                parse_address(args.metrics)
            except ValueError as exc:
                raise _UsageError(str(exc)) from None
            if not metrics_installed():
                raise _UsageError(
                    "--metrics needs the metrics extra (prometheus-client): pip install 'mcp-interceptors[metrics]' "
                    "(with --listen, /healthz and /readyz are served without it)"
                )
    except (_UsageError, LoopUnavailableError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    from .stages import build_stages
    from .upstream_http import check_upstream_url, upstream_headers

    try:
        chain_file = None
        if args.chain is not None:
            from ..chain_file import load_chain_file

            chain_file = load_chain_file(args.chain)
        tokens: Any = jwt_verifier(args)
        if args.tokens is not None:
            tokens = read_tokens_file(args.tokens)
        if tokens is None and chain_file is not None and chain_file.tokens is not None:
            if listen is None:
                raise _UsageError("the chain file's tokens authenticate HTTP clients: use --listen")
            from interceptors.policy import BearerTokens

            tokens = BearerTokens.from_entries(chain_file.tokens, args.chain)
        if listen is not None and tokens is None:
            parse_listen(args.listen)  # beyond loopback only with authentication
        if listen is not None and args.role:  # over HTTP, roles come only from bearer tokens
            if tokens is None:
                raise _UsageError(
                    "--role gives the local user's roles, and over HTTP (--listen) every client would get them, "
                    "anonymous ones included: give HTTP clients their roles with --tokens FILE instead"
                )
            raise _UsageError("--role is for stdio: over HTTP each client's roles come from its entry in --tokens")
        headers = upstream_headers(args.upstream_header)
        if upstream_url is not None:
            check_upstream_url(upstream_url)  # UpstreamUrlError, a ValueError: exit 2 before the SDK loads
        max_line_bytes = (args.max_line_mib or DEFAULT_MAX_LINE_MIB) << 20
        policy = args.policy or (chain_file.policy if chain_file is not None else None) or "standard"
        # The policy, the vault and the tokens are checked before the SDK loads: a refusal at start is prompt.
        stages = build_stages(policy, args.audit_log, args.vault_redis, multi_principal=tokens is not None)
        from interceptors_server.serving import load_registry

        registries = [load_registry(spec) for spec in args.registry or ()]
        exposed: list[Registry] | None = None
        if args.expose_interceptors:
            # The user's own registries only (chain-file servers when they are in-process registries): the
            # built-in stages act for the gateway, on its principal's behalf, and an `interceptor/invoke` from
            # a client carries the client's own context (`vault/depseudonymize` would hand back real values).
            local = [s.registry for s in chain_file.servers if s.registry is not None] if chain_file else []
            exposed = [*registries, *(load_registry(spec) for spec in local)]
        registries = [*stages.registries, *registries]
    except (_UsageError, ValueError, OSError) as exc:  # ValueError: registry (RegistryLoadError), chain file or policy
        print(f"error: {exc}", file=sys.stderr)
        return 2
    restarts = getattr(args, "max_upstream_restarts", None)
    if restarts is not None and restarts < 1:
        print("error: --max-upstream-restarts must be at least 1", file=sys.stderr)
        return 2
    from interceptors_chain import DiscoveryError
    from interceptors_chain.failures import describe

    from .command import RouterOptions, run_router

    options = RouterOptions(
        command, _upstream_env(args) if command else None, chain_file, registries, stages, listen, tokens,
        args.role or (), exposed, bool(getattr(args, "verbose", 0)),
        extra={"metrics": args.metrics, "max_sessions_per_principal": quota, "session_idle_s": idle,
               "reload": getattr(args, "reload", False), "policy": args.policy, "chain_path": args.chain,
               "audit_log": args.audit_log, "redis": args.vault_redis, "multi_principal": tokens is not None},
        upstream_url=upstream_url, upstream_headers=headers,
        upstream_timeout=args.upstream_timeout or None, max_line_bytes=max_line_bytes,
        restart_upstream=bool(args.restart_upstream), max_upstream_restarts=restarts,
        cwd=getattr(args, "upstream_cwd", None), loop=args.loop,
    )  # fmt: skip
    try:
        return run_router(options)
    except (Exception, BaseExceptionGroup) as exc:  # the chain could not be opened: one line, no traceback
        leaf = _leaf(exc)
        logger.info("the gateway stopped on an error", exc_info=leaf)  # -v: the cause, with its traceback
        if isinstance(leaf, DiscoveryError):
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
        "(-- CMD [ARGS...] | --upstream URL [--upstream-header 'NAME: VALUE' ...])",
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
    parser.add_argument(
        "--tokens",
        metavar="FILE",
        help="bearer tokens for HTTP clients (token -> id, roles); refused when it holds tokens in clear and is "
        "group- or world-readable",
    )
    parser.add_argument(
        "--auth-issuer",
        metavar="URL",
        help="with --listen: accept OAuth 2.1 bearer JWTs from this issuer (its iss); the gateway is a resource "
        "server and serves /.well-known/oauth-protected-resource",
    )
    parser.add_argument(
        "--auth-audience", metavar="AUD", help="the aud a token must carry: this gateway's resource URL"
    )
    parser.add_argument(
        "--auth-jwks",
        metavar="URL|FILE",
        help="the issuer's keys: a JWKS URL, or a local JWKS or PEM public-key file (default: the jwks_uri of the "
        "issuer's RFC 8414 / OpenID metadata)",
    )
    parser.add_argument(
        "--auth-scope", action="append", metavar="SCOPE", help="a scope every token must have (else 403); repeatable"
    )
    parser.add_argument(
        "--auth-roles-claim",
        metavar="CLAIM",
        help="the claim holding a token's roles for the policy, a dotted path allowed (default: roles)",
    )
    parser.add_argument(
        "--auth-resource",
        metavar="URL",
        help="the resource URL in the metadata document (default: the audience when it is a URL)",
    )
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
        help="serve GET /metrics (Prometheus) and GET /healthz at HOST:PORT",
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
        help="start a dead upstream command again (reconnect a dead --upstream URL), with backoff; requests in "
        "flight get an error, client sessions stay open; after --max-upstream-restarts restarts within 60 s the "
        "gateway exits with status 1 (default, --no-restart-upstream: exit 1 when the upstream dies)",
    )
    parser.add_argument(
        "--max-upstream-restarts",
        type=int,
        metavar="N",
        help="with --restart-upstream: restarts within 60 s before the gateway gives up (default: 5)",
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
        help="with --listen: open HTTP sessions one principal may hold (default: 256)",
    )
    parser.add_argument(
        "--session-idle-timeout",
        type=float,
        metavar="SECONDS",
        help="with --listen: close an HTTP session idle this long (default: 1800)",
    )
    parser.add_argument(
        "--router",
        action="store_true",
        help="accepted for old command lines and ignored: the message router is the only gateway "
        "(so is MCP_INTERCEPTORS_ROUTER=1)",
    )
    parser.add_argument(
        "--upstream",
        dest="upstream_url",
        metavar="URL",
        help="a remote upstream server over Streamable HTTP instead of a command",
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
        f"upstream a cancellation (default: {DEFAULT_UPSTREAM_TIMEOUT_S:g}; 0: no limit)",
    )
    # Operations (issue 18): hot reload.
    parser.add_argument(
        "--reload",
        action="store_true",
        help="reload the policy and chain files when they change (SIGHUP always reloads them)",
    )
    # Several servers (issue 35): a gateway file.
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="a gateway file (YAML or JSON: servers, or a host's mcpServers as is): every server behind one "
        "aggregated endpoint (and /servers/NAME/mcp with --listen)",
    )
    parser.add_argument("--server", metavar="NAME", help="with --config: serve only this server of the file")
    parser.add_argument(
        "--loop",
        choices=LOOPS,
        default="auto",
        help="the event loop: uvloop's when installed (auto; pip install 'mcp-interceptors[fast]'), or asyncio's",
    )
    parser.add_argument("upstream", nargs=argparse.REMAINDER, help="-- then the upstream server command")
    parser.set_defaults(func=proxy)
