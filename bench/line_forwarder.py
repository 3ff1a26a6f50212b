"""The floor for a stdio gateway: a do-nothing forwarder that copies bytes both ways between its stdio and a
child server (`python -m bench.line_forwarder -- CMD ...`). No parsing, no chain: what any Python hop costs."""

from __future__ import annotations

import asyncio
import sys


async def _copy(reader: asyncio.StreamReader, write: object) -> None:
    while chunk := await reader.read(65536):
        write(chunk)  # type: ignore[operator]


async def forward(argv: list[str]) -> int:
    loop = asyncio.get_running_loop()
    child = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    stdout = asyncio.StreamWriter(transport, protocol, None, loop)
    to_child = asyncio.create_task(_copy(stdin, child.stdin.write))
    await _copy(child.stdout, stdout.write)
    to_child.cancel()
    return await child.wait()


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    return asyncio.run(forward(argv))


if __name__ == "__main__":
    sys.exit(main())
