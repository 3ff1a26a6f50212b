"""Replays conformance fixtures against our public API over a real in-memory MCP session."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

import orjson
from mcp.shared.exceptions import MCPError

from interceptors import INVOKE_METHOD, LIST_METHOD, Direction, InvocationContext, canonical
from interceptors_chain import Chain

from ..local import LocalChain, Transport
from .behaviors import FixtureError, build_registry

_ABSENT = object()


@dataclass
class FixtureReport:
    id: str
    path: str
    requirement: str | None
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def scrub(value: Any, volatile: frozenset[str]) -> Any:
    """Remove volatile keys at every depth, arrays included."""
    if isinstance(value, dict):
        return {key: scrub(item, volatile) for key, item in value.items() if key not in volatile}
    if isinstance(value, list):
        return [scrub(item, volatile) for item in value]
    return value


def find_fixtures(paths: Iterable[str | Path]) -> list[Path]:
    """Every fixture file under the given files and folders, sorted within each folder."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    return list(dict.fromkeys(found))


def _is_fixture(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("steps"), list) and "interceptors" in document


class _Session:
    """One fixture's state: a LocalChain over a fresh in-memory interceptor server."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.connection = chain.servers[0].connection

    async def list(self, event: Any) -> Any:
        params = {} if event is None else {"event": event}
        return await self.connection.request(LIST_METHOD, params, None)

    async def invoke(self, params: Mapping[str, Any]) -> tuple[bool, Any]:
        try:
            return True, await self.connection.request(INVOKE_METHOD, dict(params), None)
        except MCPError as exc:
            return False, exc.error.code

    async def apply(self, event: str, phase: str, payload: Any, session_id: str | None) -> tuple[str, Any]:
        # The fixtures take the client's vantage point: requests are sent, responses are received.
        direction = Direction.SENDING if phase == "request" else Direction.RECEIVING
        context = None if session_id is None else InvocationContext(session_id=session_id)
        result = await self.chain.execute(event, phase, payload, direction=direction, context=context)
        return ("deny" if result.blocked else "allow"), result.payload_or(payload)


async def _run_step(session: _Session, step: Mapping[str, Any], volatile: frozenset[str]) -> str | None:
    """Run one step; return None when it passes, else a one-line reason."""
    op = step.get("op")
    expect = step.get("expect")
    if not isinstance(expect, Mapping):
        return "step has no expect object"
    if op == "list":
        actual = await session.list(step.get("event"))
        got = canonical(scrub(actual, volatile))
        want = expect.get("canonical", canonical(expect.get("result")))
        return None if got == want else f"expected {want} actual {got}"
    if op == "invoke":
        params = step.get("params")
        if not isinstance(params, Mapping):
            return "invoke step has no params object"
        ok, value = await session.invoke(params)
        if "errorCode" in expect:
            if ok:
                return f"expected error {expect['errorCode']}, got a result"
            return None if value == expect["errorCode"] else f"expected error {expect['errorCode']}, got {value}"
        if not ok:
            return f"expected a result, got error {value}"
        got = canonical(scrub(value, volatile))
        want = expect.get("canonical", canonical(expect.get("result")))
        return None if got == want else f"expected {want} actual {got}"
    if op in ("apply", "chain"):
        context = step.get("context")
        session_id = context.get("sessionId") if isinstance(context, Mapping) else None
        phase = step.get("phase")
        if phase not in ("request", "response"):
            return f"unknown phase {phase!r}"
        decision, final = await session.apply(str(step.get("event")), phase, step.get("payload"), session_id)
        if decision != expect.get("decision"):
            return f"expected decision '{expect.get('decision')}', got '{decision}'"
        rendered = canonical(scrub(final, volatile))
        want_final = expect.get("finalPayloadCanonical", _ABSENT)
        if want_final is _ABSENT and "finalPayload" in expect:
            want_final = canonical(expect["finalPayload"])
        if want_final is not _ABSENT and rendered != want_final:
            return f"final payload mismatch: expected {want_final} actual {rendered}"
        for forbidden in expect.get("forbids", ()):
            if forbidden in rendered:
                return "forbidden content present"
        for required in expect.get("requires", ()):
            if required not in rendered:
                return "required content absent"
        return None
    return f"unknown op {op!r}"


async def run_fixture(
    path: Path, document: Mapping[str, Any], mode: Literal["auto", "legacy"], transport: Transport = "inprocess"
) -> FixtureReport:
    report = FixtureReport(str(document.get("id", path.stem)), str(path), document.get("requirement"))
    volatile = frozenset(document.get("volatile") or ())
    try:
        registry = build_registry(document.get("interceptors"))
    except FixtureError as exc:
        report.failures.append(f"setup: {exc}")
        return report
    if not len(registry):
        report.failures.append("setup: a fixture needs at least one interceptor")
        return report
    async with LocalChain(registry, mode=mode, transport=transport) as chain:
        session = _Session(chain)
        for index, step in enumerate(document["steps"]):
            op = step.get("op") if isinstance(step, Mapping) else None
            try:
                if not isinstance(step, Mapping):
                    raise FixtureError("step must be an object")
                problem = await _run_step(session, step, volatile)
            except Exception as exc:  # an adapter exception fails the step, never the runner
                problem = f"raised {type(exc).__name__}: {exc}"
            if problem is not None:
                report.failures.append(f"step {index} ({op}): {problem}")
    return report


async def run_conformance(
    paths: Iterable[str | Path], *, mode: Literal["auto", "legacy"] = "auto", out: TextIO = sys.stdout,
    verbose: bool = False, transport: Transport = "inprocess",
) -> tuple[int, int]:  # fmt: skip
    """Replay every fixture found; print one line per failing step and `N passed, M failed` last.

    `transport` is how the chain reaches the fixture's interceptors: "inprocess" (`HostConnection`) or
    "mcp" (an SDK client session, in the era `mode` names)."""
    passed = failed = 0
    for path in find_fixtures(paths):
        try:
            document = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            print(f"FAIL {path}: unreadable fixture ({type(exc).__name__})", file=out)
            failed += 1
            continue
        if not _is_fixture(document):
            continue  # manifests, schemas and other JSON that is not a fixture
        report = await run_fixture(path, document, mode, transport)
        if report.passed:
            passed += 1
            if verbose:
                print(f"PASS {report.id} [{report.requirement}]", file=out)
        else:
            failed += 1
            for failure in report.failures:
                print(f"FAIL {report.id} {failure}", file=out)
    print(f"{passed} passed, {failed} failed", file=out)
    return passed, failed
