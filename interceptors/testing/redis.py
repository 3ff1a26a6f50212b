"""A Redis for tests and benchmarks: `$REDIS_URL` when it answers, else a throwaway `redis-server`.

Shared by the project's Redis tests and the vault benchmark, and usable by anyone testing a vault on Redis.
Needs the `redis` client package (the `redis` extra) and, without `$REDIS_URL`, a `redis-server` binary.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import InterceptorsError

_START_TIMEOUT_S = 10.0


class RedisUnavailable(InterceptorsError, RuntimeError):
    """No Redis to use here (no client package, no `$REDIS_URL` that answers, no `redis-server`)."""


class RedisStartError(InterceptorsError, RuntimeError):
    """A `redis-server` was found but did not start."""


def redis_answers(url: str) -> bool:
    """Whether a Redis at `url` answers PING within a second."""
    try:
        import redis
    except ImportError:
        return False
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except redis.RedisError:
        return False


@contextmanager
def throwaway_redis(workdir: str | None = None) -> Iterator[str]:
    """Yield a Redis URL: `$REDIS_URL` if it answers, else a `redis-server` on a free loopback port that
    persists nothing and is stopped on exit. Raises RedisUnavailable or RedisStartError."""
    try:
        import redis  # noqa: F401
    except ImportError:
        raise RedisUnavailable(
            "the redis client package is not installed (pip install 'mcp-interceptors[redis]')"
        ) from None
    configured = os.environ.get("REDIS_URL")
    if configured and redis_answers(configured):
        yield configured
        return
    binary = shutil.which("redis-server")
    if binary is None:
        state = "does not answer" if configured else "is not set"
        raise RedisUnavailable(f"no Redis: REDIS_URL {state} and no redis-server binary is installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    if workdir is not None:
        command += ["--dir", workdir]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not redis_answers(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RedisStartError("redis-server did not start")
            time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
