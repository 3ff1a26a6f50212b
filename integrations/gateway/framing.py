"""The gateway's newline framing is the protocol core's (`interceptors.protocol.framing`): re-exported here."""

from __future__ import annotations

from interceptors.protocol.framing import HEAD_BYTES, MAX_LINE_BYTES, OVERSIZED, LineSplitter, Oversized

__all__ = ["HEAD_BYTES", "MAX_LINE_BYTES", "OVERSIZED", "LineSplitter", "Oversized"]
