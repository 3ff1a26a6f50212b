"""The router's messages are the protocol core's (`interceptors.protocol.messages`): re-exported here."""

from __future__ import annotations

from interceptors.protocol.messages import *  # noqa: F403
from interceptors.protocol.messages import __all__ as __all__
