"""The raw baseline of `bench.stdio_pipe`: each stdin line answered as a JSON-RPC result echoing its params.

No framework, no validation: what one Python process pays to read a line, parse it, encode a reply and write
it to the same kind of pipe the interceptor server reads.
"""

from __future__ import annotations

import asyncio
import sys

import orjson


def _reply(line: bytes) -> bytes | None:
    message = orjson.loads(line)
    if "id" not in message:
        return None
    return orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")}) + b"\n"


class _Echo(asyncio.Protocol):
    """`--asyncio`: the same echo on an event loop, as the interceptor server reads and writes its pipes."""

    def __init__(self, out: asyncio.WriteTransport) -> None:
        self._out = out
        self._rest = b""

    def data_received(self, data: bytes) -> None:
        *lines, self._rest = (self._rest + data).split(b"\n")
        replies = [reply for line in lines if (reply := _reply(line)) is not None]
        if replies:
            self._out.write(b"".join(replies))


async def _serve() -> None:
    loop = asyncio.get_running_loop()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout.buffer)
    closed = loop.create_future()

    class Reader(_Echo):
        def connection_lost(self, exc: Exception | None) -> None:
            closed.set_result(None)

    await loop.connect_read_pipe(lambda: Reader(out), sys.stdin.buffer)
    await closed


def main() -> None:
    if "--asyncio" in sys.argv[1:]:
        asyncio.run(_serve())
        return
    read = sys.stdin.buffer.readline
    out = sys.stdout.buffer
    while line := read():
        reply = _reply(line)
        if reply is not None:
            out.write(reply)
            out.flush()


if __name__ == "__main__":
    main()
