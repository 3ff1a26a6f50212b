"""Prometheus metrics and a health report for a gateway (extra `metrics`: prometheus-client).

`Metrics` records what the gateway sees: requests by method and outcome, call and per-interceptor
latency, blocks by interceptor and reason, redactions by detector family, rate-limit refusals, restarts
and reloads; interceptor servers' liveness and restarts are read from the chain at scrape time.
`metrics_asgi(metrics)` serves `GET /metrics` and `GET /healthz` to mount on an HTTP front;
`serve_metrics(metrics, host, port)` is a tiny HTTP server for the stdio gateway (`--metrics HOST:PORT`).

Nothing secret is exported: label values are method, interceptor, server and family names, each checked
against a name pattern and bounded in number (past the bound they read "other"), never payload text.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import orjson

from interceptors import Phase

if TYPE_CHECKING:
    from interceptors_chain import Chain, ExecutionResult

logger = logging.getLogger("interceptors.metrics")

TRANSFORMS_REPORT_KEY = "io.mcp-interceptors/transforms"
_LABEL = re.compile(r"^[A-Za-z0-9_./:\-]{1,80}$")
MAX_LABEL_VALUES = 256
_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _Labels:
    """At most `limit` distinct values of one label, each a plain name; anything else is "other"."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self.seen: set[str] = set()

    def __call__(self, value: Any) -> str:
        if not isinstance(value, str) or _LABEL.match(value) is None:
            return "other"
        if value in self.seen:
            return value
        if len(self.seen) >= self.limit:
            return "other"
        self.seen.add(value)
        return value


class Health:
    """What `/healthz` and `/readyz` report: the upstream, the interceptor servers, Redis, the generation.

    Needs no extra: a load balancer's health check must not depend on `prometheus-client`. `Metrics` is one.
    """

    def __init__(self, chain: Chain | None = None) -> None:
        self.chain = chain
        self.chain_of: Callable[[], Any] | None = None
        """Where the chain in use is read when it is not `chain` (a reload swaps the adapter's)."""
        self.upstream_connected: Callable[[], bool] | None = None
        self.redis: Any = None
        """A `RedisProbe` (`up`, `fail_open`) when the gateway shares state through `--redis`."""
        self.generation: Callable[[], int] | None = None
        """The configuration generation (1 at start, +1 per accepted reload)."""

    def note_reload(self, ok: bool) -> None:
        """Counted by `Metrics`; health keeps no count."""

    def health(self) -> dict[str, Any]:
        """Upstream connected and interceptor servers up: names and booleans only."""
        servers = {name: {"up": up, "restarts": restarts} for name, up, restarts in self._servers()}
        upstream = None if self.upstream_connected is None else bool(self.upstream_connected())
        ok = upstream is not False and all(entry["up"] for entry in servers.values())
        out: dict[str, Any] = {"status": "ok", "interceptorServers": servers}
        if upstream is not None:
            out["upstream"] = {"connected": upstream}
        if self.redis is not None:  # unreachable and fail-closed: calls under a limit or the guard are refused
            reachable = bool(self.redis.up)
            out["redis"] = {"reachable": reachable, "failOpen": bool(self.redis.fail_open)}
            ok = ok and (reachable or bool(self.redis.fail_open))
        if self.generation is not None:
            out["generation"] = self.generation()
        if not ok:
            out["status"] = "degraded"
        return out

    def _servers(self) -> Iterator[tuple[str, bool, int]]:
        chain = self.chain_of() if self.chain_of is not None else self.chain
        if chain is None:
            return
        for server in chain.servers:
            connection = server.connection
            up = getattr(connection, "connected", True)
            restarts = getattr(connection, "restarts", 0)
            yield server.name, bool(up), int(restarts) if isinstance(restarts, int) else 0


class Metrics(Health):
    """The gateway's metrics in their own registry (several gateways in one process never collide)."""

    def __init__(self, chain: Chain | None = None, *, namespace: str = "mcp_interceptors") -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        super().__init__(chain)
        self.registry = CollectorRegistry()
        self._methods, self._outcomes = _Labels(), _Labels(32)
        self._interceptors, self._families = _Labels(), _Labels()
        self._started: dict[int, tuple[str, float]] = {}
        ns, reg = namespace, self.registry
        self.requests = Counter(
            f"{ns}_requests", "Requests by method and outcome.", ["method", "outcome"], registry=reg
        )
        self.call_seconds = Histogram(
            f"{ns}_call_seconds", "Whole-call latency (request pass to reply pass).", ["method"],
            buckets=_BUCKETS, registry=reg,
        )  # fmt: skip
        self.chain_seconds = Histogram(
            f"{ns}_chain_seconds", "One chain execution.", ["phase"], buckets=_BUCKETS, registry=reg
        )
        self.interceptor_seconds = Histogram(
            f"{ns}_interceptor_seconds", "One invoke, per interceptor.", ["interceptor", "server"],
            buckets=_BUCKETS, registry=reg,
        )  # fmt: skip
        self.blocks = Counter(
            f"{ns}_blocks", "Blocks by interceptor and reason.", ["interceptor", "reason"], registry=reg
        )
        self.redactions = Counter(
            f"{ns}_redactions", "Values transformed, by detector family and action.", ["family", "action"], registry=reg
        )
        self.rate_limited = Counter(f"{ns}_rate_limited", "Calls refused by a rate limit.", registry=reg)
        self.upstream_restarts = Counter(f"{ns}_upstream_restarts", "Upstream server restarts.", registry=reg)
        self.reloads = Counter(f"{ns}_reloads", "Policy or chain reloads by outcome.", ["outcome"], registry=reg)
        reg.register(_ServersCollector(self, ns))

    # Recording -------------------------------------------------------------------------------------
    def observe_execution(self, result: ExecutionResult, *, method: str | None = None) -> None:
        """Per-interceptor latency, blocks, rate-limit refusals and redactions of one chain execution."""
        self.chain_seconds.labels(result.phase.value).observe(result.total_duration_ms / 1000)
        for record in result.results:
            name = self._interceptors(record.interceptor)
            self.interceptor_seconds.labels(name, self._interceptors(record.server)).observe(record.duration_ms / 1000)
        for abort in result.aborted_at:
            reason = _policy_outcome(result, abort.interceptor) or abort.kind.value
            if reason == "rate_limited":
                self.rate_limited.inc()
            self.blocks.labels(self._interceptors(abort.interceptor), self._interceptors(reason)).inc()
        if result.modified:
            self._count_redactions(result.final_payload)
        if method is not None and result.phase is Phase.REQUEST:
            self.requests.labels(self._methods(method), "blocked" if result.blocked else "passed").inc()

    def _count_redactions(self, payload: Any) -> None:
        meta = payload.get("_meta") if isinstance(payload, Mapping) else None
        if not isinstance(meta, Mapping):
            params = payload.get("params") if isinstance(payload, Mapping) else None
            meta = params.get("_meta") if isinstance(params, Mapping) else None
        report = meta.get(TRANSFORMS_REPORT_KEY) if isinstance(meta, Mapping) else None
        if not isinstance(report, Mapping):
            return
        for action, bucket in report.items():
            if not isinstance(bucket, Mapping) or action == "projection":
                continue
            for family, amount in bucket.items():
                if isinstance(amount, int) and not isinstance(amount, bool) and 0 < amount <= 1_000_000:
                    self.redactions.labels(self._families(family), self._families(action)).inc(amount)

    def request_started(self, call: int, method: str) -> None:
        if len(self._started) > 65_536:  # abandoned calls never grow this without end
            self._started.clear()
        self._started[call] = (method, time.perf_counter())

    def request_finished(self, call: int) -> None:
        started = self._started.pop(call, None)
        if started is not None:
            self.call_seconds.labels(self._methods(started[0])).observe(time.perf_counter() - started[1])

    def note_request(self, method: str, outcome: str) -> None:
        self.requests.labels(self._methods(method), self._outcomes(outcome)).inc()

    def note_reload(self, ok: bool) -> None:
        self.reloads.labels("ok" if ok else "rejected").inc()

    # Reading ---------------------------------------------------------------------------------------
    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _ServersCollector:
    """Interceptor servers' liveness and restarts, read from the chain at scrape time."""

    def __init__(self, metrics: Metrics, namespace: str) -> None:
        self.metrics = metrics
        self.namespace = namespace

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        up = GaugeMetricFamily(f"{self.namespace}_interceptor_server_up", "1 when connected.", labels=["server"])
        restarts = CounterMetricFamily(
            f"{self.namespace}_interceptor_server_restarts", "Restarts of a supervised server.", labels=["server"]
        )
        for name, alive, count in self.metrics._servers():
            up.add_metric([name], 1.0 if alive else 0.0)
            restarts.add_metric([name], float(count))
        yield up
        yield restarts
        connected = self.metrics.upstream_connected
        if connected is not None:
            gauge = GaugeMetricFamily(f"{self.namespace}_upstream_connected", "1 when the upstream is connected.")
            gauge.add_metric([], 1.0 if connected() else 0.0)
            yield gauge
        if self.metrics.redis is not None:
            gauge = GaugeMetricFamily(f"{self.namespace}_redis_up", "1 when the shared Redis answered its last ping.")
            gauge.add_metric([], 1.0 if self.metrics.redis.up else 0.0)
            yield gauge
        if self.metrics.generation is not None:
            gauge = GaugeMetricFamily(f"{self.namespace}_config_generation", "Policy and chain generation in use.")
            gauge.add_metric([], float(self.metrics.generation()))
            yield gauge


def _policy_outcome(result: ExecutionResult, interceptor: str) -> str | None:
    """The policy's own word for a refusal (`info.outcome`: denied, rate_limited, not_found)."""
    for record in result.results:
        if record.interceptor == interceptor and record.result is not None:
            info = record.result.get("info")
            if isinstance(info, Mapping) and isinstance(info.get("outcome"), str):
                outcome: str = info["outcome"]
                return outcome
    return None


# Serving -------------------------------------------------------------------------------------------


HEALTH_PATHS = ("/healthz", "/readyz")


def answer(metrics: Health, method: str, path: str) -> tuple[int, str, bytes]:
    """(status, content type, body) for one request: the whole routing of both servers. `/metrics` only
    with `Metrics` (the extra); `/healthz` and `/readyz` always (the same report, 503 when degraded)."""
    path = path.split("?", 1)[0]
    if path not in HEALTH_PATHS and not (path == "/metrics" and isinstance(metrics, Metrics)):
        return 404, "text/plain; charset=utf-8", b"not found\n"
    if method not in ("GET", "HEAD"):
        return 405, "text/plain; charset=utf-8", b"method not allowed\n"
    if path == "/metrics":
        assert isinstance(metrics, Metrics)
        body, content_type = metrics.exposition()
        return 200, content_type, body
    report = metrics.health()
    return (200 if report["status"] == "ok" else 503), "application/json", orjson.dumps(report)


def metrics_asgi(metrics: Health) -> Callable[[Any, Any, Any], Awaitable[None]]:
    """An ASGI app serving `/healthz`, `/readyz` and (with `Metrics`) `/metrics`, for the HTTP front to mount."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            return
        status, content_type, body = answer(metrics, scope.get("method", "GET"), scope.get("path", "/"))
        headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else body})

    return app


_REASONS = {
    200: "OK", 400: "Bad Request", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    421: "Misdirected Request", 503: "Service Unavailable",
}  # fmt: skip
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def _names_this_server(value: str, bound: str, *, with_scheme: bool) -> bool:
    """Whether a Host (`name[:port]`) or Origin (`scheme://name[:port]`) names this server: a loopback name, or
    the address it is bound to. Any other name is a page that rebound its DNS name to us (DNS rebinding)."""
    if with_scheme:
        scheme, sep, value = value.partition("://")
        if not sep or scheme.lower() not in ("http", "https"):
            return False
    name = value.strip().lower()
    if name.startswith("["):
        end = name.find("]")
        if end < 0 or (name[end + 1 :] and not (name[end + 1] == ":" and name[end + 2 :].isdigit())):
            return False
        name = name[1:end]
    else:
        name, _, port = name.partition(":")
        if port and not port.isdigit():
            return False
    if not name:
        return False
    return name in _LOOPBACK_NAMES or (bound.lower() not in _WILDCARDS and name == bound.lower())


def refusal(headers: Mapping[str, str], bound: str) -> tuple[int, str, bytes] | None:
    """(status, content type, body) refusing a request whose Host or Origin does not name this server, else None."""
    if not _names_this_server(headers.get("host", ""), bound, with_scheme=False):
        return 421, "text/plain; charset=utf-8", b"invalid Host header\n"
    origin = headers.get("origin")
    if origin is not None and not _names_this_server(origin, bound, with_scheme=True):
        return 403, "text/plain; charset=utf-8", b"invalid Origin header\n"
    return None


def _head_headers(head: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, colon, value = line.decode("latin-1").partition(":")
        if colon:
            headers[name.strip().lower()] = value.strip()
    return headers


async def serve_metrics(metrics: Health, host: str, port: int) -> asyncio.Server:
    """A minimal HTTP/1.1 server (one request per connection) on `host:port`; close it to stop."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            refused = refusal(_head_headers(head), host)
            if len(parts) != 3:
                status, content_type, body = 400, "text/plain; charset=utf-8", b"bad request\n"
            elif refused is not None:
                status, content_type, body = refused
            else:
                status, content_type, body = answer(metrics, parts[0], parts[1])
            reply = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\ncontent-type: {content_type}\r\n"
                f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
            ).encode()
            writer.write(reply + (b"" if parts[0] == "HEAD" else body))
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass
        except Exception as exc:  # a scrape must never take the gateway down
            logger.warning("metrics request failed: %s", type(exc).__name__)
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=16_384)


def parse_address(value: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:PORT`) for `--metrics`."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65_535:
        raise ValueError(f"--metrics wants HOST:PORT, not {value!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def metrics_installed() -> bool:
    """Whether the `metrics` extra (prometheus-client) can be imported (it is, right after, when it can)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


def health_for(adapter: Any, upstream_connected: Callable[[], bool] | None = None) -> Health:
    """The health report of the router gateway without the `metrics` extra: the adapter's chain as it is now."""
    health = Health()
    health.chain_of = lambda: adapter.chain
    health.upstream_connected = upstream_connected
    return health


def instrument(adapter: Any, upstream_connected: Callable[[], bool] | None = None) -> Metrics:
    """Metrics for the router gateway's chain adapter: every `RunChain` it performs is observed.

    Requests count on their request pass (by method, passed or blocked); the whole-call latency runs from
    the request pass to the pass of its result or error (calls whose reply runs no chain are not timed).
    """
    from .gateway.chain_adapter import SIDE_CHANNELS
    from .gateway.router import ChainBlocked
    from .gateway.router.channels import Channel

    metrics = Metrics(adapter.chain)
    metrics.upstream_connected = upstream_connected
    run = adapter.run

    async def observed(action: Any) -> Any:
        state = action.request
        asked = state is not None and action.phase == Phase.REQUEST and action.channel == Channel.REQUEST
        if asked:
            metrics.request_started(state.call, state.method)
        outcome = await run(action)
        if asked:
            metrics.note_request(state.method, "blocked" if isinstance(outcome, ChainBlocked) else "passed")
        elif state is not None and action.phase == Phase.RESPONSE and action.channel not in SIDE_CHANNELS:
            metrics.request_finished(state.call)
        return outcome

    adapter.run = observed
    observe_chain(metrics, adapter.chain)
    return metrics


def observe_chain(metrics: Metrics, chain: Any) -> None:
    """Observe every execution of `chain` (also a chain a reload swaps in: its servers are then the ones read)."""
    execute = chain.execute

    async def execute_observed(event: str, phase: Any, payload: Any, **options: Any) -> Any:
        result = await execute(event, phase, payload, **options)
        metrics.observe_execution(result)
        return result

    chain.execute = execute_observed
    metrics.chain = chain
