"""Issue 31's long backpressure run: 8 clients send 48 KiB arguments to a synchronous upstream (it reads a line,
then writes one) through the in-process gateway for a while; every call must be answered (a deadlock between the
two full pipes would hang them all). The suite's test does the same for 6 calls a client; this runs for minutes.

python -m bench.backpressure [--policy none|standard|FILE] [--seconds 60]
"""

from __future__ import annotations

import argparse
import sys
import time

import anyio
from mcp import Client
from mcp.types import TextContent

from integrations.gateway.inprocess import InProcessGateway
from integrations.gateway.stages import build_stages
from interceptors import Registry
from interceptors_server import LocalChain

from .gateway_bench import ROOT

SYNC_UPSTREAM = [sys.executable, "-m", "tests.servers.sync_upstream"]
CLIENTS = 8
ARGUMENT_BYTES = 48 * 1024
CALL_BOUND_S = 30.0  # a call unanswered this long counts as hung: the run stops with an error


async def run(policy: str, seconds: float) -> tuple[int, int]:
    """(answered with the text sent, answered with another text: a cap of the policy, say)."""
    stages = build_stages(policy, None)
    same = other = 0
    deadline = time.monotonic() + seconds
    async with (
        LocalChain(*(stages.registries or [Registry()])) as chain,
        InProcessGateway(SYNC_UPSTREAM, chain, stages=stages, cwd=str(ROOT)) as gateway,
    ):

        async def client(number: int) -> None:
            nonlocal same, other
            text = str(number) * ARGUMENT_BYTES
            async with Client(gateway.server, mode="legacy") as session:
                while time.monotonic() < deadline:
                    with anyio.fail_after(CALL_BOUND_S):
                        result = await session.call_tool("echo", {"text": text})
                    block = result.content[0]
                    if isinstance(block, TextContent) and block.text == text:
                        same += 1
                    else:
                        other += 1

        async with anyio.create_task_group() as tasks:
            for number in range(CLIENTS):
                tasks.start_soon(client, number)
    return same, other


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="none")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    same, other = anyio.run(run, args.policy, args.seconds)
    print(f"policy {args.policy}, {CLIENTS} clients, {ARGUMENT_BYTES // 1024} KiB, {args.seconds:.0f} s: "
          f"{same + other} answered ({same} as sent, {other} changed by the policy), 0 hung")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
