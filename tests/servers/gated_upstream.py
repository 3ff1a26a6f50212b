"""The stdio test upstream (tests/servers/upstream_server.py), unless a gate file exists.

`python -m tests.servers.gated_upstream GATE`: with GATE present it exits 3 at once (an upstream that cannot
start again), otherwise it is the test upstream. The gateway's restart tests close and open the gate.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    if len(sys.argv) > 1 and os.path.exists(sys.argv[1]):
        sys.exit(3)
    from tests.servers.upstream_server import main as serve

    serve()


if __name__ == "__main__":
    main()
