"""The router's eras are the protocol core's (`interceptors.protocol.eras`): re-exported here."""

from __future__ import annotations

from interceptors.protocol.eras import *  # noqa: F403
from interceptors.protocol.eras import __all__ as __all__
