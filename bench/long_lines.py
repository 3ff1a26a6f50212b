"""Single-line results of 8 to 32 MiB through the gateway (`proxy --policy none`), timed end to end.

python -m bench.long_lines [MIB ...]

Linear framing means the time grows with the size, not with its square; the target is 32 MiB in < 3 s.
A 64 MiB text is over the 64 MiB line limit once JSON-encoded: refused cleanly (see
tests/interceptors/protocol/test_long_lines.py).
Uses the raw JSON-lines client of the tests (the SDK's own stdio client is not what is measured).
"""

from __future__ import annotations

import sys
import time

from tests.interceptors.protocol.test_long_lines import MIB, RawClient, text_length
from tests.processes import stop


def main(sizes: list[float]) -> None:
    client = RawClient("--policy", "none")
    try:
        client.start()
        text_length(client.big(1))  # warm up
        for mib in sizes:
            started = time.monotonic()
            assert text_length(client.big(mib)) == int(mib * MIB)
            print(f"{mib:g} MiB: {time.monotonic() - started:.2f} s", flush=True)
    finally:
        stop(client.process)


if __name__ == "__main__":
    main([float(arg) for arg in sys.argv[1:]] or [8, 16, 32])
