"""JSON-RPC over newline-delimited JSON (stdio): the words for a broken reply, and junk-line counting.

Shared by the invoker's stdio pipe (`interceptors_chain/stdio_pipe.py`) and the CLI's SDK-free stdio client
(`integrations/quick_stdio.py`), so both name the same problems in the same words. Both frame lines with the
protocol core's framing (`interceptors.protocol.framing.LineSplitter`) and read a broken reply's id with its
`recover_id`, as every other stdio edge does.
No SDK and no I/O but a log line.
"""

from __future__ import annotations

import logging
from typing import Any

from .protocol.framing import MAX_LINE_BYTES

DEFAULT_MAX_LINE_BYTES = MAX_LINE_BYTES
"""The longest message line read from a server: a larger one is refused with a clear error, not buffered."""


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
