"""CPU time per `Chain.execute` through an in-process host, tracing off (the default) or on.

    python -m bench.tracing_overhead [--calls N] [--otel]

Run it on two checkouts (with and without the tracing hooks) to measure what the hooks cost when no tracer
is configured; `--otel` enables the OpenTelemetry SDK with a no-export processor to show the traced cost.
"""

from __future__ import annotations

import argparse
import time

import anyio

from interceptors import Direction, Invocation, Registry, Verdict
from interceptors_server import LocalChain


def registry() -> Registry:
    reg = Registry()

    @reg.validator("bench/allow", events=["tools/call"], phase="request")
    def allow(inv: Invocation) -> Verdict:
        return Verdict.allow()

    return reg


async def run(calls: int) -> float:
    payload = {"name": "echo", "arguments": {"text": "hello"}}
    async with LocalChain(registry()) as chain:
        for _ in range(200):  # warm up
            await chain.execute("tools/call", "request", payload, direction=Direction.SENDING)
        started = time.process_time()
        for _ in range(calls):
            await chain.execute("tools/call", "request", payload, direction=Direction.SENDING)
        return (time.process_time() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--otel", action="store_true")
    args = parser.parse_args()
    if args.otel:
        from opentelemetry.sdk.trace import TracerProvider

        from interceptors_chain import tracing

        tracing.enable(TracerProvider())
    print(
        f"{anyio.run(run, args.calls):.2f} us CPU per execute ({args.calls} calls, otel={'on' if args.otel else 'off'})"
    )


if __name__ == "__main__":
    main()
