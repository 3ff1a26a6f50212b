"""Which event loop runs a long-lived command (`serve`, `proxy`, `proxy --config`): one choice, one runner.

Here, below the server and the gateway, because the commands must refuse a bad `--loop` before the MCP SDK
loads. Nothing is imported at module load but the standard library; anyio comes when a loop is started.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple, Unpack

from .errors import InterceptorsError

LOOPS = ("auto", "asyncio", "uvloop")
"""The `--loop` choices: `auto` is uvloop's loop when it is installed, else asyncio's."""

_T = TypeVar("_T")
_Args = TypeVarTuple("_Args")


class LoopUnavailableError(InterceptorsError, ValueError):
    """`--loop uvloop` where uvloop is not installed (the `fast` extra) or not supported (Windows), or a loop
    name that is not one of `LOOPS`. Its message is written for the command's user."""


def uvloop_available() -> bool:
    return sys.platform != "win32" and importlib.util.find_spec("uvloop") is not None


def wants_uvloop(loop: str) -> bool:
    """Whether `loop` (one of `LOOPS`) runs on uvloop here; LoopUnavailableError when it cannot be honoured."""
    if loop not in LOOPS:
        raise LoopUnavailableError(f"--loop {loop}: not an event loop; choose one of {', '.join(LOOPS)}")
    if loop == "asyncio":
        return False
    available = uvloop_available()
    if loop == "uvloop" and not available:
        reason = "uvloop does not run on Windows" if sys.platform == "win32" else "uvloop is not installed"
        raise LoopUnavailableError(
            f"--loop uvloop: {reason}; install it with pip install 'mcp-interceptors[fast]', "
            "or run on asyncio's loop with --loop asyncio (or auto)"
        )
    return available


def run_on_loop(function: Callable[[Unpack[_Args]], Awaitable[_T]], *args: *_Args, loop: str = "auto") -> _T:
    """Run `function(*args)` on asyncio, with uvloop's event loop when `loop` asks for it or, for `auto`, when it
    is installed, and return its result. The loop's own work (waking tasks, reading and writing pipes and
    sockets) is a good part of a call's CPU in the server and the gateway, and uvloop does it in C
    (`python -m bench.stdio_pipe`, `python -m bench.gateway_cpu --loops`); everything above the loop is the
    same code either way."""
    import anyio

    use_uvloop = wants_uvloop(loop)
    return anyio.run(function, *args, backend="asyncio", backend_options={"use_uvloop": use_uvloop})
