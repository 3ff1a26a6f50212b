"""Newline framing for stdio: bytes in, whole lines out, with a bound on a line's size.

The one framing of every stdio edge: the gateway's downstream and upstream, the interceptor server's
transport and the chain's pipe to a spawned interceptor server. Why our own: the SDK's stdio transport
decodes and validates every line into models; each edge wants the raw bytes of each line, once. A line
longer than the bound is not buffered without end: it is skipped up to its newline and reported as one
`OVERSIZED` item (with its first bytes, to read a reply's id from), so its sender can be told.
"""

from __future__ import annotations

from typing import Final

MAX_LINE_BYTES: Final = 64 * 1024 * 1024
"""The largest message accepted on a stdio pipe (a big resource blob fits; an endless line does not)."""


HEAD_BYTES: Final = 512
"""How much of an oversized line is kept: enough to read the id of a reply, so its request can be answered."""


class Oversized:
    """A line that exceeded the bound: only its first `HEAD_BYTES` are kept (all oversized lines are equal)."""

    __slots__ = ("head",)

    def __init__(self, head: bytes = b"") -> None:
        self.head = head

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Oversized)

    def __hash__(self) -> int:
        return hash(Oversized)


OVERSIZED: Final = Oversized()


class LineSplitter:
    """Feed chunks, get complete non-empty lines (without the newline; a trailing CR is dropped too)."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        self.max_line = max_line
        self._buffer = bytearray()
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        buffer = self._buffer
        end = chunk.find(b"\n")
        if end == len(chunk) - 1 and not buffer and not self._skipping and end <= self.max_line:
            # One whole line in one read, nothing held over: what a peer waiting for each reply always sends.
            line = chunk[:end].rstrip(b"\r")
            return [line] if line and not line.isspace() else []
        out: list[bytes | Oversized] = []
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            else:
                if buffer:
                    buffer += chunk[start:end]
                    line = bytes(buffer)
                    buffer.clear()
                else:
                    line = chunk[start:end]
                if len(line) > self.max_line:
                    out.append(Oversized(line[:HEAD_BYTES]))
                else:
                    line = line.rstrip(b"\r")
                    if line and not line.isspace():  # a blank line is skipped (no copy made to tell)
                        out.append(line)
            start = end + 1
        if not self._skipping and start < len(chunk):
            buffer += chunk[start:]
            if len(buffer) > self.max_line:
                out.append(Oversized(bytes(buffer[:HEAD_BYTES])))
                buffer.clear()
                self._skipping = True
        return out

    def rest(self) -> bytes | None:
        """What is left at end of input (a last line without newline), if anything."""
        line = bytes(self._buffer).strip()
        self._buffer.clear()
        return line or None
