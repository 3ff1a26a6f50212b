"""JSON-RPC over newline-delimited JSON (stdio): framing with a line limit, and the words for a broken reply.

Shared by the invoker's stdio pipe (`interceptors_chain/stdio_pipe.py`) and the CLI's SDK-free stdio client
(`integrations/quick_stdio.py`), so both frame lines alike and name the same problems in the same words.
No SDK and no I/O but a log line.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from .codec import loads_exact

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest message line read from a server: a larger one is refused with a clear error, not buffered."""


class Oversized:
    """The start of a line that outgrew the limit (the rest of it is skipped)."""

    __slots__ = ("head",)

    def __init__(self, head: bytes) -> None:
        self.head = head


class LineFramer:
    """Newline-delimited framing in linear time, with a maximum line size.

    Bytes are appended to one buffer and searched for a newline only where the last search stopped;
    complete lines are cut out once per chunk. A line longer than `max_line_bytes` is reported once (as
    an `Oversized` holding its first bytes) and skipped up to its newline, so memory stays bounded.
    """

    HEAD_BYTES = 512

    def __init__(self, max_line_bytes: int) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self._buffer = bytearray()
        self._searched = 0
        self._skipping = False

    def feed(self, chunk: bytes) -> list[bytes | Oversized]:
        out: list[bytes | Oversized] = []
        buffer = self._buffer
        buffer += chunk
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, self._searched))
            if end < 0:
                break
            if self._skipping:
                self._skipping = False
            elif end - start > self.max_line_bytes:
                out.append(Oversized(bytes(buffer[start : start + self.HEAD_BYTES])))
            else:
                out.append(bytes(buffer[start:end]))
            start = end + 1
            self._searched = start
        if start:
            del buffer[:start]
        self._searched = len(buffer)
        if len(buffer) > self.max_line_bytes:
            if not self._skipping:
                out.append(Oversized(bytes(buffer[: self.HEAD_BYTES])))
                self._skipping = True
            buffer.clear()
            self._searched = 0
        return out


_REPLY_ID = re.compile(rb'^\s*\{.{0,200}?"id"\s*:\s*("(?:[^"\\]|\\.){0,100}"|-?[0-9]{1,19})', re.DOTALL)


def salvage_id(line: bytes) -> str | int | None:
    """The id a broken reply line seems to carry (from its first bytes), to fail that request at once."""
    match = _REPLY_ID.match(line[: LineFramer.HEAD_BYTES])
    if match is None:
        return None
    text = match.group(1)
    if text.startswith(b'"'):
        try:
            value = loads_exact(text)
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    return int(text)


def unreadable_problem(line: bytes) -> str:
    """Why a line that carried no JSON could not be read, in words."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return "it is not valid UTF-8"
    return "it is not valid JSON (truncated or corrupt)"


def reply_problem(reply: dict[str, Any]) -> str | None:
    """What is wrong with a reply object, in words; None when it is a well-formed result or error."""
    if "error" in reply:
        error = reply["error"]
        if isinstance(error, dict) and isinstance(error.get("code"), int) and isinstance(error.get("message"), str):
            return None
        return "its error has no integer code and string message"
    if "result" not in reply:
        return "it has neither a result nor an error"
    if not isinstance(reply["result"], dict):
        return f"its result is {_json_kind(reply['result'])}, not an object"
    return None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    return "not an object"


def size_text(count: int) -> str:
    """A byte count in words: `64 MiB`, `16 KiB`, `100 bytes`."""
    if count % (1 << 20) == 0:
        return f"{count >> 20} MiB"
    if count % (1 << 10) == 0:
        return f"{count >> 10} KiB"
    return f"{count} bytes"


class JunkLines:
    """Lines from one server that are not JSON-RPC: counted, the first few logged (never their content: they
    may hold anything), and more than `limit` in a row (when set) mean the server is broken."""

    LOGGED = 5

    def __init__(self, who: str, logger: logging.Logger, limit: int | None = None) -> None:
        self.who = who
        self.logger = logger
        self.limit = limit
        self.count = 0
        self.in_a_row = 0

    def good(self) -> None:
        """A good message: the run of junk is over."""
        self.in_a_row = 0

    def add(self) -> bool:
        """One more line that is not JSON-RPC; True when the server is now to be treated as broken."""
        self.count += 1
        self.in_a_row += 1
        if self.count <= self.LOGGED:
            more = " (further ones are counted, not logged)" if self.count == self.LOGGED else ""
            self.logger.warning("%s wrote a line that is not JSON-RPC%s", self.who, more)
        if self.limit is None or self.in_a_row <= self.limit:
            return False
        self.logger.warning(
            "%s wrote %d lines in a row that are not JSON-RPC: treating it as broken", self.who, self.in_a_row
        )
        return True
