"""`mcp-interceptors proxy`: the router gateway started from the options `proxy` (`cli.py`) already parsed.

Exit status: 1 when the upstream cannot be started or goes away, 0 when the client
leaves or a signal stops the gateway, 2 for what this gateway cannot do yet (one `error:` line). With
`--listen` it serves Streamable HTTP (`downstream_http.py`) until a signal stops it or the upstream leaves.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio

from interceptors import InvocationContext, Registry

logger = logging.getLogger("interceptors.gateway")


@dataclass
class RouterOptions:
    """What `proxy` parsed: the upstream command, the chain, the policy stages, the listen address, principals."""

    command: Sequence[str]
    env: Mapping[str, str] | None = None
    chain_file: Any = None
    registries: Sequence[Registry] = ()
    stages: Any = None
    listen: tuple[str, int] | None = None
    tokens: Any = None
    roles: Sequence[str] = ()
    exposed: Sequence[Registry] | None = None
    verbose: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    upstream_url: str | None = None
    """`--upstream URL`: a remote server over Streamable HTTP instead of the `command` subprocess."""
    upstream_headers: Sequence[tuple[str, str]] = ()
    upstream_timeout: float | None = None
    """`--upstream-timeout`: seconds a request may wait for the upstream (None: never times out)."""
    max_line_bytes: int | None = None
    """`--max-line-mib`: the largest upstream message read (None: the framing's default)."""
    restart_upstream: bool = False
    """`--restart-upstream`: a dead upstream is started again (reconnected over HTTP), bounded."""
    max_upstream_restarts: int | None = None
    """`--max-upstream-restarts`: restarts within a minute before the gateway gives up (None: the default)."""
    cwd: str | None = None
    """The upstream command's working directory (a gateway file's `cwd`; None: the gateway's)."""
    loop: str = "auto"
    """`--loop`: the event loop (`interceptors.loops.LOOPS`; auto: uvloop's when installed)."""


def run_router(options: RouterOptions) -> int:
    """Run the router gateway on the event loop `options.loop` chooses; returns the exit status."""
    from interceptors.loops import run_on_loop

    try:
        return run_on_loop(_main, options, loop=options.loop)
    except KeyboardInterrupt:
        return 130


async def _main(options: RouterOptions) -> int:
    from interceptors.policy import principal_for_stdio
    from interceptors.protocol.framing import MAX_LINE_BYTES
    from interceptors_chain import Chain

    from .catalog import Catalog
    from .chain_adapter import ChainAdapter
    from .downstream_stdio import StdioDownstream
    from .local import LocalAnswers
    from .recovery import DEFAULT_MAX_RESTARTS, RestartPolicy, SupervisedUpstream
    from .reload import ReloadRejected, reloader_for
    from .runner import Runner
    from .upstream_http import HttpUpstream, UpstreamUrlError
    from .upstream_stdio import StdioUpstream, UpstreamStartError

    max_payload = options.max_line_bytes or MAX_LINE_BYTES  # in-process hosts take whatever a line may carry
    async with AsyncExitStack() as stack:
        stages = options.stages
        if stages is not None:
            stack.callback(stages.close)  # the vault saves its mappings at shutdown (when it has a path)
        reloader = await stack.enter_async_context(reloader_for(options, max_payload))  # SIGHUP and --reload
        try:
            chain: Chain = await reloader.open(options.registries)
        except ReloadRejected as exc:  # an interceptor server that cannot start, as an upstream that cannot
            print(f"error: {exc}", file=sys.stderr)
            return 1
        adapter = reloader.adapter = ChainAdapter(chain, on_refusal=getattr(stages, "refused", None))
        from ..otel import instrument_calls

        instrument_calls(adapter)  # with tracing on: one span per MCP request, the chain's passes under it
        local = LocalAnswers(
            options.exposed,
            getattr(stages, "local_tools", ()),
            getattr(stages, "authorize", None),
        )
        router = router_for(adapter, local, hold_back=bool(options.registries) or options.chain_file is not None)
        upstream: StdioUpstream | HttpUpstream | SupervisedUpstream

        async def start_upstream() -> StdioUpstream | HttpUpstream:
            if options.upstream_url is not None:
                return await HttpUpstream.start(
                    options.upstream_url,
                    options.upstream_headers,
                    protocol_version=lambda: router.upstream.version,
                    max_message=options.max_line_bytes or MAX_LINE_BYTES,
                )
            return await StdioUpstream.start(
                options.command, options.env, max_line=options.max_line_bytes or MAX_LINE_BYTES, cwd=options.cwd
            )

        try:
            upstream = await start_upstream()
            if options.restart_upstream:  # the same start, again, when it dies
                policy = RestartPolicy(max_restarts=options.max_upstream_restarts or DEFAULT_MAX_RESTARTS)
                upstream = SupervisedUpstream(upstream, start_upstream, policy)
        except (UpstreamStartError, UpstreamUrlError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, UpstreamUrlError) else 1  # a URL that is not one is bad input
        metrics: Any = None
        if options.extra.get("metrics") or (options.listen is not None and _metrics_installed()):
            from ..metrics import instrument

            metrics = reloader.metrics = instrument(adapter, lambda: _upstream_alive(upstream))
            reloader.instrument(metrics, stack)
            if isinstance(upstream, SupervisedUpstream):
                upstream.on_restart = metrics.upstream_restarts.inc
        elif options.listen is not None:  # no `metrics` extra: `/healthz` and `/readyz` all the same
            from ..metrics import health_for

            metrics = health_for(adapter, lambda: _upstream_alive(upstream))
            reloader.instrument(metrics, stack)
        if options.extra.get("metrics"):  # --metrics HOST:PORT: /metrics and /healthz beside the gateway
            from ..metrics import parse_address, serve_metrics

            served = await serve_metrics(metrics, *parse_address(options.extra["metrics"]))
            stack.callback(served.close)
        try:
            engine = getattr(stages, "engine", None)
            # over HTTP the catalog also gives the tool schemas that 2026-07-28 `Mcp-Param-*` headers are checked on
            catalog = Catalog(router, reloader.learn) if engine is not None or options.listen is not None else None
            if options.listen is not None:
                return await _serve_http(options, router, adapter, upstream, catalog, metrics, local, reloader.request)
            downstream = await StdioDownstream.open()  # --max-line-mib bounds the upstream's lines only
            principal = principal_for_stdio(list(options.roles))
            runner = Runner(
                router,
                adapter,
                upstream,
                downstream,
                context=InvocationContext(principal=principal, session_id="stdio"),
                principal=principal.id,
                catalog=catalog,
                handle_signals=True,
                timeout=options.upstream_timeout,
                local=local,
            )
            runner.on_reload = reloader.request
            if options.upstream_url is not None or options.restart_upstream:
                runner.enable_renewal()
            code = await runner.run()
            await downstream.aclose()
        finally:
            with anyio.CancelScope(shield=True):
                await upstream.aclose()
        return code


def router_for(adapter: Any, local: Any, *, hold_back: bool = True) -> Any:
    """The gateway's `Router`: the chain's plans, the spec check, what the gateway answers itself, and (unless
    nothing could redact: `--policy none` and no chain) the hold-back of secrets cut across progress or logs."""
    from interceptors.transforms.stream import StreamHoldBack

    from .router import Router, RouterConfig
    from .spec_check import SpecCheck

    # The handshake era first: the router relays list_changed, updates and server requests only there yet.
    return Router(
        RouterConfig(
            has_work=adapter.has_work,
            prefer_handshake=True,
            check_result=SpecCheck(),
            local_methods=local.methods,
            local_tools=local.tool_descriptors,
            extra_capabilities=local.capabilities(),
            hold_back=StreamHoldBack if hold_back else None,
        )
    )


def _upstream_alive(upstream: Any) -> bool:
    """For `/healthz`: a child upstream that has not exited, an HTTP upstream not gone."""
    upstream = getattr(upstream, "current", upstream)  # a supervised one: the upstream running now
    if upstream is None:
        return False
    process = getattr(upstream, "process", None)
    if process is not None:
        return bool(process.returncode is None)
    return not getattr(upstream, "gone", False)


def _metrics_installed() -> bool:
    """Whether the `metrics` extra is there: the HTTP front then serves `/metrics` too."""
    from ..metrics import metrics_installed

    return metrics_installed()


async def _serve_http(
    options: RouterOptions,
    router: Any,
    adapter: Any,
    upstream: Any,
    catalog: Any,
    metrics: Any = None,
    local: Any = None,
    on_reload: Any = None,
) -> int:
    """`--listen`: Streamable HTTP clients, each session bound to its bearer token's principal (`--tokens`)."""
    from interceptors.policy import principal_for_stdio

    from .downstream_http import HttpRunner, ListenError, listening_socket
    from .http_sessions import DEFAULT_IDLE_TIMEOUT_S, DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, HttpSettings

    assert options.listen is not None
    try:
        sock = listening_socket(*options.listen)
    except ListenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    quota = options.extra.get("max_sessions_per_principal") or DEFAULT_MAX_SESSIONS_PER_PRINCIPAL
    idle = options.extra.get("session_idle_s") or DEFAULT_IDLE_TIMEOUT_S
    from .cli import is_loopback

    # beyond loopback only with authentication (`parse_listen`), so any Host: the token guards `/mcp`
    any_host = not is_loopback(options.listen[0]) and options.tokens is not None
    settings = HttpSettings(max_sessions_per_principal=quota, idle_timeout_s=idle, any_host=any_host)
    try:
        runner = HttpRunner(
            router,
            adapter,
            upstream,
            sock,
            tokens=options.tokens,
            default_principal=None if options.tokens is not None else principal_for_stdio([]),
            settings=settings,
            catalog=catalog,
            handle_signals=True,
            timeout=options.upstream_timeout,
            local=local,
            on_listening=lambda host, port: _announce(host, port, options.tokens),
        )
        runner.on_reload = on_reload
        if options.upstream_url is not None or options.restart_upstream:
            runner.enable_renewal()
        if metrics is not None:
            from ..metrics import metrics_asgi

            served = metrics_asgi(metrics)
            runner.front.side_apps.update({"/metrics": served, "/healthz": served, "/readyz": served})
        return await runner.run()
    finally:
        sock.close()


def _announce(host: str, port: int, auth: Any) -> None:
    """The listening line, saying the truth about who may connect."""
    shown = f"[{host}]" if ":" in host else host
    if auth is None:
        who = "no authentication: loopback clients only"
    elif hasattr(auth, "authorization_servers"):
        who = f"OAuth bearer tokens of {auth.authorization_servers[0]}"
    else:
        who = "bearer tokens of the tokens file"
    print(f"mcp-interceptors proxy: listening on http://{shown}:{port}/mcp ({who})", file=sys.stderr, flush=True)
