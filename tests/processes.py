"""Process bookkeeping for tests: the children of this process, read from /proc (Linux)."""

from __future__ import annotations

import os
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
