"""Process bookkeeping for tests: the children of this process, read from /proc (Linux)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path


def children(pid: int | None = None) -> dict[int, str]:
    """Direct children of `pid` (default: this process) mapped to their state letter (Z = zombie)."""
    parent = os.getpid() if pid is None else pid
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == parent:
            found[int(entry.name)] = fields[0]
    return found


def listening_url(process: subprocess.Popen[bytes], lines: int = 50) -> str:
    """The URL a gateway announces on stderr (`... listening on http://HOST:PORT/mcp`)."""
    assert process.stderr is not None
    for _ in range(lines):
        if match := re.search(r"listening on (http://\S+)", process.stderr.readline().decode()):
            return match.group(1)
    raise AssertionError("the gateway did not start listening")


def stop(process: subprocess.Popen[bytes]) -> None:
    """Terminate, then kill if it lingers, and always reap: no zombies left behind."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
