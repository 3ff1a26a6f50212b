"""An interceptor server with an injected fault, chosen by argv: for the remote-fault tests.

python -m tests.servers.faulty_host ok | crash-after N | hang | garbage | exit-at-start | slow-start SECONDS
    | hang-once FILE

hang-once: the first process (FILE does not exist yet: it creates it) blocks its event loop in the first
invoke (it answers nothing any more, pings included) and ignores SIGTERM and stdin closing; a restarted one
(FILE exists) answers normally.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import anyio

from interceptors import Invocation, Mutation, Registry, Verdict
from interceptors_server.serving import build_server, serve_stdio

FAULT = sys.argv[1] if len(sys.argv) > 1 else "ok"
TEXT_ARGUMENT = sys.argv[2] if len(sys.argv) > 2 else ""
ARGUMENT = float(TEXT_ARGUMENT) if TEXT_ARGUMENT.replace(".", "", 1).isdigit() else 0.0
HUNG = {"now": False}
CALLS = {"count": 0}
RENDEZVOUS = {"arrived": 0}
MET = anyio.Event()

registry = Registry()


@registry.validator("faulty/check", events="tools/call", phase="both")
async def check(invocation: Invocation) -> Verdict:
    CALLS["count"] += 1
    if FAULT == "crash-after" and CALLS["count"] > ARGUMENT:
        os._exit(7)
    if HUNG["now"]:  # hung for good: the whole process stops answering (no timeout answer, no ping)
        time.sleep(3600)
    if FAULT == "hang":
        await anyio.sleep(3600)
    if FAULT == "garbage":
        os.write(1, b'this is not json\n{"jsonrpc": 2}\n\x00\xff\n')
        await anyio.sleep(3600)
    if isinstance(invocation.payload, dict) and invocation.payload.get("rendezvous"):
        # Waits (30 s at most) until `rendezvous` invokes are in this handler at once: proof of overlap by
        # meeting, with no clock in the test.
        RENDEZVOUS["arrived"] += 1
        if RENDEZVOUS["arrived"] >= int(invocation.payload["rendezvous"]):
            MET.set()
        with anyio.move_on_after(30):
            await MET.wait()
        return Verdict.allow({"pid": os.getpid(), "met": MET.is_set()})
    if isinstance(invocation.payload, dict) and invocation.payload.get("sleep"):
        await anyio.sleep(float(invocation.payload["sleep"]))
    return Verdict.allow({"pid": os.getpid()})


@registry.mutator("faulty/tag", events="tools/call", phase="request")
async def tag(invocation: Invocation) -> Mutation:
    return Mutation({**invocation.payload, "tagged": True})


if __name__ == "__main__":
    if FAULT == "exit-at-start":
        sys.exit(3)
    if FAULT == "slow-start":
        time.sleep(ARGUMENT)
    if FAULT == "hang-once" and not os.path.exists(TEXT_ARGUMENT):
        with open(TEXT_ARGUMENT, "w") as marker:
            marker.write(str(os.getpid()))
        HUNG["now"] = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(f"faulty host {FAULT} starting", file=sys.stderr, flush=True)
    anyio.run(serve_stdio, build_server([registry]))
    if HUNG["now"]:  # a hung server does not notice its stdin closing either
        time.sleep(3600)
