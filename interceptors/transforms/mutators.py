"""The transform stages as SEP-2624 interceptors.

- `<prefix>output`: a response-phase mutator on tools/call, resources/read, prompts/get and
  completion/complete (and on error/progress/log payloads the gateway presents as results); on the
  metadata events (`METADATA_EVENTS`: lists, the initialize result a gateway relays, tasks) it scrubs only.
- `<prefix>outbound`: a request-phase mutator scrubbing the requests a server sends the client.
- `<prefix>request`: a request-phase validator on the same events and `resources/subscribe`. It refuses
  requests that carry secrets (`GUARDED_CHANNELS`: tool arguments for `guard_secrets` with `action: reject`;
  prompt and completion arguments, resource URIs and every request's `_meta` for any `guard_secrets`; those that
  carry no documents strictly, `STRICT_CHANNELS`) and
  remembers what was asked for (tool name, completion argument), keyed by the invocation context's trace id,
  for the response phase.
- `<prefix>input`: a request-phase mutator on tools/call running the rest of the input pipeline
  (`guard_secrets` with `action: redact`, `depseudonymize`).
- `<prefix>answers`: a response-phase validator on the client's answers to the server's requests (sampling,
  elicitation, roots; the gateway runs them receiving): any `guard_secrets` refuses one that carries a secret,
  and the server gets the refusal instead.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson

from .._fastinit import fast_init
from ..errors import INVALID_PARAMS
from ..outcomes import Mutation, Verdict
from ..protocol.methods import METHODS, Stage
from ..registry import Invocation, Registry
from .argvalues import address_key
from .assembly import assemble_input, assemble_output, check_transform_sections
from .base import Pipeline, TransformContext, default_pseudonymizer
from .cap import DEFAULT_MAX_OUTPUT_CHARS
from .channels import CHANNEL_META_KEY, transform_metadata, transform_payload
from .guard import URI_SEGMENT_KEY, SecretGuard, SecretsRefused
from .listed import ListedResources
from .strategies import KeyedHasher, Pseudonymizer

OUTPUT_EVENTS = METHODS.names(Stage.OUTPUT)
METADATA_EVENTS = METHODS.response_events(Stage.METADATA)
"""Response-phase events whose results are metadata (or a task's stored result), scrubbed by the output stage;
`logging/setLevel` and `resources/subscribe` carry what a gateway relays outside any request (logs, resource
updates)."""
CLIENT_REQUEST_EVENTS = METHODS.names(Stage.OUTBOUND)
"""Requests a server sends the client: their params are scrubbed on the way out (request phase)."""
CLIENT_ANSWER_EVENTS = METHODS.names(Stage.ANSWERS)
"""Requests a server sends the client whose answers (response phase, receiving) the guard judges."""
ALL_EVENTS = (*OUTPUT_EVENTS, *METADATA_EVENTS, *CLIENT_ANSWER_EVENTS)
GUARDED_CHANNELS: dict[str, tuple[tuple[str, ...], ...]] = {
    "tools/call": (("_meta",),),  # its arguments: the refusing guards (below), or the input mutator's scrub
    "prompts/get": (("arguments",), ("_meta",)),
    "completion/complete": (("argument", "value"), ("context", "arguments"), ("_meta",)),
    "resources/read": (("uri",), ("_meta",)),
    "resources/subscribe": (("uri",), ("_meta",)),
}
"""Where in a client request's params every `guard_secrets` (reject or redact: these are refused, never
scrubbed) looks for secrets, besides a tool call's arguments."""
STRICT_CHANNELS: frozenset[tuple[str, ...]] = frozenset(
    {("uri",), ("_meta",), ("arguments",), ("argument", "value"), ("context", "arguments")}
)
"""The channels of `GUARDED_CHANNELS` judged strictly (`SecretGuard.findings(strict=True)`): a vendor's token is
refused even where its body reads like documentation's sample (`ghp_0000…`), which the detectors spare in tool
arguments, where a model passes documents. Addresses, metadata, a completion's values and a prompt's arguments (a
user's values for a template, measured on the public benign corpora: 1 more refusal in 2,279 real files, none in 607
tool outputs)."""
STRICT_ANSWERS = frozenset({"elicitation/create", "roots/list", "sampling/createMessage"})
"""The client's answers judged strictly: a form's values, roots' URIs and names, and a sampling answer (a model's
text sent to the server that asked: a sample token in it is refused as in a prompt's arguments)."""
TASK_RESULT_EVENT = "tasks/result"
_KINDS = {
    "tools/call": "tool",
    "resources/read": "resource",
    "prompts/get": "prompt",
    "completion/complete": "completion",
}


@fast_init
@dataclass(frozen=True, slots=True)
class CallFacts:
    """What a selector may use to pick the matching rules and hints of one call."""

    event: str
    name: str | None = None
    """Tool or prompt name, resource URI, or the completion's ref (prompt name or template)."""
    argument: str | None = None
    """The completion argument's name."""
    principal: str | None = None
    roles: tuple[str, ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class Selection:
    """The policy engine's answer for one call: matching rules (in order), the primitive's hints and facts."""

    rules: Sequence[Mapping[str, Any]] = ()
    hints: Mapping[str, Any] | None = None
    sensitivity: str | None = None
    category: str | None = None


Selector = Callable[[CallFacts], Selection]


def _params(payload: Any) -> Mapping[str, Any]:
    if payload.__class__ is dict:  # what a host hands over (a JSON decoding): no ABC check
        params = payload.get("params")
        if params.__class__ is dict:
            return params
    else:
        params = payload.get("params") if isinstance(payload, Mapping) else None
    return params if isinstance(params, Mapping) else {}


def request_facts(event: str, payload: Any, invocation: Invocation | None = None) -> CallFacts:
    """The facts of a request-phase payload `{"method": ..., "params": {...}}`."""
    params = _params(payload)
    name: str | None = None
    argument: str | None = None
    if event in ("tools/call", "prompts/get"):
        name = params.get("name") if isinstance(params.get("name"), str) else None
    elif event == "resources/read":
        name = params.get("uri") if isinstance(params.get("uri"), str) else None
    elif event == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, Mapping):
            value = ref.get("name", ref.get("uri"))
            name = value if isinstance(value, str) else None
        arg = params.get("argument")
        if isinstance(arg, Mapping) and isinstance(arg.get("name"), str):
            argument = arg["name"]
    principal, roles = _who(invocation)
    return CallFacts(event, name, argument, principal, roles)


def _who(invocation: Invocation | None) -> tuple[str | None, tuple[str, ...]]:
    context = invocation.context if invocation is not None else None
    principal = context.principal if context is not None else None
    if principal is None:
        return None, ()
    claims = principal.claims or {}
    roles = claims.get("roles")
    role_list = tuple(r for r in roles if isinstance(r, str)) if isinstance(roles, list | tuple) else ()
    return principal.id, role_list


def _call_key(invocation: Invocation) -> tuple[str, str, str, str] | None:
    """One call's key: its principal first (the memo's partition), then session, trace and event. The span id
    is part of the trace: requests of one W3C trace share the trace id."""
    context = invocation.context
    if context is None or context.trace_id is None:
        return None
    trace = context.trace_id if context.span_id is None else f"{context.trace_id}/{context.span_id}"
    principal = (context.principal.id or "") if context.principal is not None else ""
    return (principal, context.session_id or "", trace, invocation.event)


@fast_init
@dataclass(frozen=True, slots=True)
class _Call:
    """What the request phase learned about a call, for its input and response passes: selected once."""

    facts: CallFacts
    selection: Selection


_MemoKey = tuple[str, str, str, str]


class _Memo:
    """Calls waiting for their response phase, bounded per principal: a call refused or hidden never reaches its
    response and ages out, and a flood of those from one principal evicts only that principal's calls."""

    def __init__(self, per_principal: int = 1024, principals: int = 4096) -> None:
        self.per_principal = per_principal
        self.principals = principals
        self.parts: OrderedDict[str, OrderedDict[_MemoKey, _Call]] = OrderedDict()
        self.lock = threading.Lock()

    def put(self, key: _MemoKey, call: _Call) -> None:
        with self.lock:
            part = self.parts.get(key[0])
            if part is None:
                part = self.parts[key[0]] = OrderedDict()
                while len(self.parts) > self.principals:
                    self.parts.popitem(last=False)
            else:
                self.parts.move_to_end(key[0])
            part[key] = call
            part.move_to_end(key)
            while len(part) > self.per_principal:
                part.popitem(last=False)

    def get(self, key: _MemoKey) -> _Call | None:
        with self.lock:
            part = self.parts.get(key[0])
            return part.get(key) if part is not None else None

    def pop(self, key: _MemoKey) -> _Call | None:
        with self.lock:
            part = self.parts.get(key[0])
            if part is None:
                return None
            call = part.pop(key, None)
            if not part:
                del self.parts[key[0]]
            return call

    def __len__(self) -> int:
        with self.lock:
            return sum(len(part) for part in self.parts.values())


class _CleanViews:
    """`_meta` views the guards found nothing in, by their JSON: a 2026-07-28 client sends the same envelope (its
    protocol version, client info and capabilities) on every request, and judging it again finds the same nothing
    (the guards are deterministic). Only clean verdicts are kept, and only small views; bounded, emptied when full.
    Keyed by the guards themselves (a reload builds new ones), the kind of call and the principal."""

    def __init__(self, size: int = 1024, max_bytes: int = 4096) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self.seen: set[tuple[Any, ...]] = set()

    def key(self, guards: tuple[SecretGuard, ...], view: Any, ctx: TransformContext) -> tuple[Any, ...] | None:
        try:
            text = orjson.dumps(view)
        except TypeError:  # not JSON as it stands (no wire delivers that): judged every time
            return None
        return None if len(text) > self.max_bytes else (guards, ctx.kind, ctx.principal, text)

    def remember(self, key: tuple[Any, ...]) -> None:
        if len(self.seen) >= self.size:
            self.seen.clear()
        self.seen.add(key)


class TransformStages:
    """The handlers behind the registered interceptors (usable directly, without a chain)."""

    def __init__(
        self,
        policy_sections: Mapping[str, Any],
        *,
        select: Selector | None = None,
        pseudonymizer: Pseudonymizer | None = None,
        max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    ) -> None:
        check_transform_sections(policy_sections, "policy")
        self.policy = policy_sections
        self.select = select
        self.pseudonymizer = pseudonymizer or default_pseudonymizer()
        self.max_output_chars = max_output_chars
        self.memo = _Memo()
        self.tasks = _Memo()
        """The calls that created tasks (SEP-1686), by principal and task id: a task's result gets its rules."""
        self.clean_meta = _CleanViews()
        """Request `_meta` views found clean, not judged again (the 2026-07-28 envelope repeats on every request)."""
        self.listed = ListedResources()
        """The resource URIs and templates the upstream listed: a URI it named is not judged as a nameless one."""
        # Built now, so a bad policy fails at registration rather than on the first call.
        self.default_output = assemble_output(policy_sections)
        self.default_input = assemble_input(policy_sections)
        self._default_split = _split_input(self.default_input)

    def _input_split(self, pipeline: Pipeline) -> tuple[tuple[SecretGuard, ...], Pipeline]:
        """An input pipeline's refusing guards (the request validator's) and the rest (the input mutator's)."""
        return self._default_split if pipeline is self.default_input else _split_input(pipeline)

    def _selection(self, facts: CallFacts) -> Selection:
        return self.select(facts) if self.select is not None else Selection()

    def _pipelines(self, selection: Selection) -> tuple[Pipeline, Pipeline]:
        if not selection.rules and selection.hints is None:
            return self.default_output, self.default_input
        return (
            assemble_output(self.policy, selection.rules, selection.hints),
            assemble_input(self.policy, selection.rules, selection.hints),
        )

    def _context(self, facts: CallFacts, selection: Selection, direction: str) -> TransformContext:
        return TransformContext(
            kind=_KINDS.get(facts.event, "tool"),
            name=facts.name,
            direction=direction,
            principal=facts.principal,
            roles=facts.roles,
            sensitivity=selection.sensitivity,
            category=selection.category,
            pseudonymizer=self.pseudonymizer,
        )

    def possible_work(self) -> PossibleWork:
        """What any call could need, over the policy and every rule and role it could select: an interceptor
        whose work is empty under every selection is not registered. A policy with no transform anywhere
        (`open`) gets no stage at all, so no output cap either."""
        candidates: list[Sequence[Mapping[str, Any]]] = [(), *((body,) for body in _rule_bodies(self.policy))]
        pipelines = any(not assemble_output(self.policy, rules).empty for rules in candidates)
        steps = [t for rules in candidates for t in assemble_input(self.policy, rules).transforms]
        refuse = any(isinstance(t, SecretGuard) and t.action == "reject" for t in steps)
        scrub = any(not (isinstance(t, SecretGuard) and t.action == "reject") for t in steps)
        guard = any(isinstance(t, SecretGuard) for t in steps)
        capped = self.max_output_chars is not None and (refuse or scrub)
        return PossibleWork(output=pipelines or capped, input=scrub, refuse=refuse, guard=guard)

    # --- request phase ----------------------------------------------------------------------------------

    def _request_call(self, invocation: Invocation) -> _Call:
        """The call's facts and the policy's selection for it: from the memo when the request phase already
        chose (one rule selection per call), else now."""
        key = _call_key(invocation)
        call = self.memo.get(key) if key is not None else None
        if call is None:
            facts = request_facts(invocation.event, invocation.payload, invocation)
            call = _Call(facts, self._selection(facts))
        return call

    def request(self, invocation: Invocation) -> Verdict:
        """Remember the call (and its rules) for its response; refuse tools/call arguments carrying secrets.
        A `tasks/result` is the call that created its task, continued: it gets that call's rules."""
        key = _call_key(invocation)
        if invocation.event == TASK_RESULT_EVENT:
            created = self._task_call(invocation, _params(invocation.payload).get("taskId"))
            if key is not None and created is not None:
                self.memo.put(key, created)
            return Verdict.allow()
        facts = request_facts(invocation.event, invocation.payload, invocation)
        selection = self._selection(facts)
        if key is not None:
            self.memo.put(key, _Call(facts, selection))
        channels = GUARDED_CHANNELS.get(invocation.event)
        if channels is None:
            return Verdict.allow()
        _, pipeline = self._pipelines(selection)
        guards = _guards(pipeline)
        if not guards:
            return Verdict.allow()
        params = _params(invocation.payload)
        ctx = self._context(facts, selection, "input")
        refusers, _ = self._input_split(pipeline)
        arguments = params.get("arguments") if invocation.event == "tools/call" else None
        if arguments is not None:
            refused = _first_refusal(refusers, arguments, ctx, "Arguments appear", "/arguments")
            if refused is not None:
                return refused
        for path in channels:
            value = _member(params, path)
            if value is None:
                continue
            subject = "Arguments appear" if path[-1] in ("arguments", "value") else "The request appears"
            base = "".join(f"/{part}" for part in path)
            # A completion argument's value is judged as a member under the argument's name.
            named = _member(params, ("argument", "name")) if path == ("argument", "value") else None
            member = named if isinstance(named, str) else None
            if path == ("uri",):
                views = [(base, view, member) for view in _views(value)]
                views.extend(self._uri_parts(value, base))
            elif path == ("_meta",):
                views = [(at, view, member) for at, view in _meta_views(value)]
            else:
                views = [(base, value, member)]
            strict = path in STRICT_CHANNELS
            for at, view, name in views:
                known = self.clean_meta.key(guards, view, ctx) if path == ("_meta",) else None
                if known is not None and known in self.clean_meta.seen:
                    continue
                judges = guards if name != URI_SEGMENT_KEY else tuple(g for g in guards if g.uri_segments)
                refused = _first_refusal(judges, view, ctx, subject, at, name, strict=strict)
                if refused is not None:
                    return refused
                if known is not None:
                    self.clean_meta.remember(known)
        return Verdict.allow()

    def _uri_parts(self, uri: Any, base: str) -> list[tuple[str, Any, str | None]]:
        """A requested URI's parts judged as named values, when one of the upstream's templates spells it: each under
        its template's name, as a tool argument of that name would be (`{fileId}` is an id; `{query}` is not; a
        `{path}` segment by segment, as `URI_SEGMENT_KEY` members: a path is words, never one random token). A URI
        the upstream listed or never named adds nothing: its lone segments stay ids (a Drive file, a Figma key)."""
        parts = self.listed.parts(uri) if isinstance(uri, str) else None
        if not parts:
            return []
        views: list[tuple[str, Any, str | None]] = []
        for name, text in parts:
            if address_key(name):  # `{path}`: segments, as in a URI nobody named (a path is words, not a token)
                segments = _long_segments(unquote(text, errors="replace"))
                views.extend([(base, segments, URI_SEGMENT_KEY)] if segments else ())
            else:
                views.append((base, unquote(text, errors="replace"), name))
        return views

    def answer(self, invocation: Invocation) -> Verdict:
        """The client's answer to a request of the server's (sampling, elicitation, roots): refused, whole, when
        it carries a secret; the gateway sends the server this refusal instead of the answer."""
        payload = invocation.payload
        if not isinstance(payload, Mapping) or not payload:
            return Verdict.allow()
        principal, roles = _who(invocation)
        facts = CallFacts(invocation.event, principal=principal, roles=roles)
        selection = self._selection(facts)
        _, pipeline = self._pipelines(selection)
        subject = f"The client's answer to {invocation.event} appears"
        guards, ctx = _guards(pipeline), self._context(facts, selection, "input")
        strict = invocation.event in STRICT_ANSWERS
        refused = _first_refusal(guards, payload, ctx, subject, strict=strict)
        roots = payload.get("roots") if invocation.event == "roots/list" else None
        segment_guards = tuple(g for g in guards if g.uri_segments)
        for index, root in enumerate(roots if refused is None and isinstance(roots, list) else ()):
            uri = root.get("uri") if isinstance(root, Mapping) else None
            if not isinstance(uri, str):
                continue
            at = f"/roots/{index}/uri"
            for view in _views(uri)[1:]:  # as spelled: judged above
                refused = refused or _first_refusal(guards, view, ctx, subject, at, strict=True)
            local = uri[:5].lower() == "file:"
            segments = _uri_segments(uri) if refused is None and local else []
            if segments:  # a root is the client's own folder, named by nobody: a path is words, not a token
                refused = _first_refusal(segment_guards, segments, ctx, subject, at, URI_SEGMENT_KEY, strict=True)
        return refused if refused is not None else Verdict.allow()

    def input(self, invocation: Invocation) -> Mutation:
        """The input pipeline over tools/call arguments (refusing guards already ran as a validator)."""
        call = self._request_call(invocation)
        facts, selection = call.facts, call.selection
        _, pipeline = self._pipelines(selection)
        _, steps = self._input_split(pipeline)
        params = _params(invocation.payload)
        arguments = params.get("arguments")
        if steps.empty or arguments is None:
            return Mutation.unchanged()
        ctx = self._context(facts, selection, "input")
        new = steps.apply(arguments, ctx)
        if new == arguments:
            return Mutation.unchanged()
        return Mutation({**invocation.payload, "params": {**params, "arguments": new}}, True)

    # --- response phase ----------------------------------------------------------------------------------

    def output(self, invocation: Invocation) -> Mutation:
        if invocation.event in _LISTING_EVENTS:
            self.listed.learn(invocation.event, invocation.payload)
        key = _call_key(invocation)
        call = None
        if key is not None:
            # A progress or log message of the call reads what the request chose; its final reply ends it.
            call = self.memo.get(key) if _is_side_message(invocation.payload) else self.memo.pop(key)
        if call is None:
            principal, roles = _who(invocation)
            facts = CallFacts(invocation.event, principal=principal, roles=roles)
            selection = self._selection(facts)
        else:
            facts, selection = call.facts, call.selection
            payload = invocation.payload
            task = payload.get("task") if payload.__class__ is dict or isinstance(payload, Mapping) else None
            if task is not None and invocation.event == "tools/call" and isinstance(task, Mapping) \
                    and isinstance(task.get("taskId"), str):  # fmt: skip
                self._remember_task(invocation, task["taskId"], call)  # its result comes by tasks/result
        pipeline, _ = self._pipelines(selection)
        if pipeline.empty and self.max_output_chars is None:
            return Mutation.unchanged()
        ctx = self._context(facts, selection, "output")
        new, changed = transform_payload(
            invocation.event,
            invocation.payload,
            pipeline,
            ctx,
            argument=facts.argument,
            max_output_chars=self.max_output_chars,
        )
        return Mutation(new, True) if changed else Mutation.unchanged()

    def _task_key(self, invocation: Invocation, task_id: str) -> tuple[str, str, str, str]:
        context = invocation.context
        principal = (context.principal.id or "") if context is not None and context.principal is not None else ""
        return (principal, "", task_id, "task")

    def _remember_task(self, invocation: Invocation, task_id: str, call: _Call) -> None:
        self.tasks.put(self._task_key(invocation, task_id), call)

    def _task_call(self, invocation: Invocation, task_id: Any) -> _Call | None:
        """The call that created task `task_id` for this principal (another principal's task is not found)."""
        return self.tasks.get(self._task_key(invocation, task_id)) if isinstance(task_id, str) else None

    def outbound(self, invocation: Invocation) -> Mutation:
        """A request to the client (sampling, elicitation): its params scrubbed like metadata."""
        params = _params(invocation.payload)
        if not params:
            return Mutation.unchanged()
        principal, roles = _who(invocation)
        facts = CallFacts(invocation.event, principal=principal, roles=roles)
        selection = self._selection(facts)
        pipeline, _ = self._pipelines(selection)
        new, changed = transform_metadata(params, pipeline, self._context(facts, selection, "output"))
        if not changed:
            return Mutation.unchanged()
        return Mutation({**invocation.payload, "params": new}, True)


def _guards(pipeline: Pipeline) -> tuple[SecretGuard, ...]:
    """Every `guard_secrets` of an input pipeline, whatever its action."""
    return tuple(t for t in pipeline.transforms if isinstance(t, SecretGuard))


_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:(?://(?:(?P<userinfo>[^/?#@]*)@)?[^/?#]*)?/*")
_URI_DELIMITERS = re.compile(r"[/?#&;]+")
_TAIL_STARTS = re.compile(r"[/?#&;=]")
MAX_URI_TAILS = 8
"""A URI is also judged from after each of its first and last delimiters, this many of each (base64 holds `/`, so
no split finds it whole; a value starts after a `/`, a `?`, a `#`, a `;`, an `&` or a `=`)."""


_LISTING_EVENTS = frozenset({"resources/list", "resources/templates/list"})
_PATH_END = re.compile(r"[?#]")
_PATH_PARTS = re.compile(r"[/;,=]+")
MIN_SEGMENT = 16
"""A path segment shorter than this is no key by the bare rule (`argvalues.bare_secret`): not judged as one."""


def _uri_segments(uri: str) -> list[str]:
    """A URI's path segments (percent-decoded, 3 layers at most; path parameters apart) long enough to be a key,
    `MAX_URI_TAILS` * 8 at most. The query is not here: each query member is judged under its own name."""
    text = uri
    for _ in range(3):
        decoded = unquote(text, errors="replace")
        if decoded == text:
            break
        text = decoded
    start = _AUTHORITY.match(text)
    rest = text[start.end() :] if start is not None else text
    end = _PATH_END.search(rest)
    return _long_segments(rest[: end.start()] if end is not None else rest)


def _long_segments(path: str) -> list[str]:
    return [part for part in _PATH_PARTS.split(path) if len(part) >= MIN_SEGMENT][: MAX_URI_TAILS * 8]


def _views(uri: Any) -> tuple[Any, ...]:
    """A URI as spelled; percent-decoded (then again while escapes remain, 3 layers at most: a server reads the
    decoded text, and `%XX` hides base64's `+/=` from the bare decoder); then, decoded, what follows its scheme
    and authority and each of its first and last delimiters, and its userinfo's parts, segments and query parts
    one per line (an encoded run starts at a delimiter; the guard judges each line of a nameless text alone)."""
    if not isinstance(uri, str):
        return (uri,)
    views = [uri]
    for _ in range(3):
        decoded = unquote(views[-1], errors="replace")
        if decoded == views[-1]:
            break
        views.append(decoded)
    last = views[-1]
    start = _AUTHORITY.match(last)
    rest = last[start.end() :] if start is not None else last
    userinfo = (start.group("userinfo") or "") if start is not None else ""
    starts = [mark.end() for mark in _TAIL_STARTS.finditer(rest)]
    if len(starts) > 2 * MAX_URI_TAILS:
        starts = starts[:MAX_URI_TAILS] + starts[-MAX_URI_TAILS:]
    tails = [rest[at:] for at in dict.fromkeys(starts)]
    lines = _URI_DELIMITERS.sub("\n", rest)
    if userinfo:
        lines = userinfo.replace(":", "\n", 1) + "\n" + lines
    candidates = (rest, *tails, lines)
    views.extend(view for view in dict.fromkeys(candidates) if view and view != last)
    return tuple(views)


PROTOCOL_META_KEYS = frozenset({"progressToken", "traceparent", "tracestate", "baggage"})
"""`_meta` members the protocol (or W3C trace context) names: their values are judged without their names (a
`progressToken` is no credential for being called a token)."""


def _meta_views(meta: Any) -> list[tuple[str, Any]]:
    """`(pointer, value)` views of a request's `_meta`: the members the protocol names each alone, the rest whole."""
    if not isinstance(meta, Mapping) or not PROTOCOL_META_KEYS.intersection(meta):
        return [("/_meta", meta)]
    rest = {key: value for key, value in meta.items() if key not in PROTOCOL_META_KEYS}
    views = [(f"/_meta/{key}", meta[key]) for key in PROTOCOL_META_KEYS.intersection(meta)]
    return [("/_meta", rest), *sorted(views)] if rest else sorted(views)


def _member(params: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = params
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _first_refusal(
    guards: Sequence[SecretGuard],
    value: Any,
    ctx: TransformContext,
    subject: str,
    base: str = "",
    key: str | None = None,
    *,
    strict: bool = False,
) -> Verdict | None:
    """The refusal of the first guard that finds a secret in `value` (its pointer under `base`; `key`: the name a
    bare value was given under; `strict`: a channel of `STRICT_CHANNELS`), or None."""
    for guard in guards:
        _, found = guard.findings(value, ctx, key, strict=strict)
        if found:
            return _refusal(SecretsRefused(found, guard.locate(value, base, ctx, strict=strict), subject))
    return None


def _split_input(pipeline: Pipeline) -> tuple[tuple[SecretGuard, ...], Pipeline]:
    refusing = tuple(t for t in pipeline.transforms if isinstance(t, SecretGuard) and t.action == "reject")
    return refusing, Pipeline(tuple(t for t in pipeline.transforms if t not in refusing))


def _is_side_message(payload: Any) -> bool:
    """A progress or log message presented as a result (the gateway marks its channel in `_meta`)."""
    meta = payload.get("_meta") if payload.__class__ is dict or isinstance(payload, Mapping) else None
    return meta is not None and isinstance(meta, Mapping) and meta.get(CHANNEL_META_KEY) in ("progress", "log")


@dataclass(frozen=True, slots=True)
class PossibleWork:
    """Which of the transform stages a policy can give anything to do."""

    output: bool
    input: bool
    refuse: bool
    guard: bool = False
    """Any `guard_secrets` (either action): the other channels and the client's answers are judged."""


def _rule_bodies(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every rule and role body a selection could hand the stages (conservative: all of them)."""
    bodies: list[Mapping[str, Any]] = [rule for rule in policy.get("rules") or () if isinstance(rule, Mapping)]
    roles = policy.get("roles")
    if isinstance(roles, Mapping):
        bodies.extend(role for role in roles.values() if isinstance(role, Mapping))
    return bodies


def _refusal(refused: SecretsRefused) -> Verdict:
    """-32602 naming entity types only; chosen explicitly where the invoker supports choosing the error."""
    refuse = getattr(Verdict, "refuse", None)
    if refuse is not None:
        verdict: Verdict = refuse(str(refused), code=INVALID_PARAMS, data=refused.data)
        return verdict
    return Verdict.deny(str(refused), path=refused.path or "params", info=refused.data)


def transforms_registry(
    policy_sections: Mapping[str, Any],
    *,
    name_prefix: str = "transforms/",
    select: Selector | None = None,
    pseudonymizer: Pseudonymizer | None = None,
    key: bytes | str | None = None,
    max_output_chars: int | None = DEFAULT_MAX_OUTPUT_CHARS,
    events: Sequence[str] = ALL_EVENTS,
    output_priority: int | None = None,
    registry: Registry | None = None,
) -> Registry:
    """A registry serving the transform stages of a policy (plain dict sections, see `assembly`).

    `select` gives the matching rules and hints of a call (the policy engine's job); without it only
    the policy-level transforms apply. `key` seeds the keyed hashes (else `$MCP_INTERCEPTORS_TRANSFORMS_KEY`,
    else a random per-process key); a `pseudonymizer` (the vault, later) replaces the keyed hasher.
    """
    if pseudonymizer is None and key is not None:
        pseudonymizer = KeyedHasher(key)
    stages = TransformStages(
        policy_sections, select=select, pseudonymizer=pseudonymizer, max_output_chars=max_output_chars
    )
    target = registry if registry is not None else Registry()
    # Pure CPU unless the pseudonymizer waits on I/O (a vault on Redis): then worker threads, never the loop.
    inline = not getattr(stages.pseudonymizer, "performs_io", False)
    unknown = [e for e in events if e not in ALL_EVENTS]
    if unknown or not events:
        raise ValueError(f"events must be among {', '.join(ALL_EVENTS)}")
    chosen = tuple(e for e in events if e in OUTPUT_EVENTS)
    if TASK_RESULT_EVENT in events and "tools/call" in chosen:
        chosen = (*chosen, TASK_RESULT_EVENT)  # its request pass finds the rules of the call that made the task
    responses = tuple(e for e in events if e in OUTPUT_EVENTS or e in METADATA_EVENTS)
    outbound = tuple(e for e in events if e in CLIENT_REQUEST_EVENTS)
    answers = tuple(e for e in events if e in CLIENT_ANSWER_EVENTS)
    work = stages.possible_work()
    if not (work.output or work.input or work.refuse):
        return target  # nothing configured anywhere in the policy: no interceptor, no cost (`open`)
    guarding = work.refuse or work.guard
    if guarding and "resources/subscribe" in events:
        chosen = (*chosen, "resources/subscribe")  # its URI goes upstream too
    if chosen:
        target.register(
            stages.request,
            name=f"{name_prefix}request",
            type="validation",
            events=chosen,
            phase="request",
            inline=inline,
            borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
            description="Refuses requests that carry secrets (arguments, URIs, _meta); remembers each call for "
            "its response.",
        )
    if answers and guarding:
        target.register(
            stages.answer,
            name=f"{name_prefix}answers",
            type="validation",
            events=answers,
            phase="response",
            inline=inline,
            borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
            description="Refuses the client's answers to sampling, elicitation and roots requests that carry secrets.",
        )
    if "tools/call" in chosen and work.input:
        target.register(
            stages.input,
            name=f"{name_prefix}input",
            type="mutation",
            events="tools/call",
            phase="request",
            inline=inline,
            borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
            description="Scrubs tool arguments (guard_secrets in redact mode) and reverses aliases and fences.",
        )
    if not work.output:
        return target
    if responses:
        target.register(
            stages.output,
            name=f"{name_prefix}output",
            type="mutation",
            events=responses,
            phase="response",
            priority=output_priority,
            inline=inline,
            borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
            description="Sanitises, redacts, substitutes, projects and annotates everything a model reads; "
            "scrubs catalog and server metadata.",
        )
    if outbound:
        target.register(
            stages.outbound,
            name=f"{name_prefix}outbound",
            type="mutation",
            events=outbound,
            phase="request",
            priority=output_priority,
            inline=inline,
            borrows=True,  # edits nothing it is given (tests/interceptors/test_borrowing_stages.py)
            description="Scrubs the requests a server sends the client (sampling, elicitation).",
        )
    return target
