"""Issue 30: a random token in an address nobody named is a key pasted into it; one the upstream named is its id.

The request guard judges a requested resource's URI (and a root's) part by part: under its template's names when the
upstream's `resources/templates/list` spells it (`{fileId}` is an id, `{query}` is not, `{path}` is read segment by
segment), not at all when `resources/list` gave it out, else each long path segment as a tool argument's whole
value. Prompt arguments and sampling answers are judged strictly: a vendor's token whose body reads like
documentation's sample is refused there too.
"""

from __future__ import annotations

import random
import string
from typing import Any
from urllib.parse import quote

from hypothesis import assume, example, given
from hypothesis import strategies as st

from interceptors import Phase
from interceptors.registry import Invocation
from interceptors.transforms.entities import looks_random
from interceptors.transforms.listed import ListedResources, template_pattern
from interceptors.transforms.mutators import TransformStages
from interceptors.transforms.profiles import STANDARD_TRANSFORMS

_BASE62 = string.ascii_letters + string.digits
DRIVE_ID = "1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms"
SAMPLE = "ghp_00000000000000000000000000000004WZ4EQ"
"""A GitHub token whose body reads like documentation's sample (CredSweeper labels it a credential)."""


def _token(seed: int, size: int = 24) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(_BASE62) for _ in range(size))


def _message(verdict: Any) -> str | None:
    return None if verdict.valid else "; ".join(message.message for message in verdict.messages or ())


def _read(stages: TransformStages, uri: str, method: str = "resources/read") -> str | None:
    payload = {"method": method, "params": {"uri": uri}}
    return _message(stages.request(Invocation("transforms/request", method, Phase.REQUEST, payload)))


def _listed(stages: TransformStages, event: str, result: dict[str, Any]) -> None:
    stages.output(Invocation("transforms/output", event, Phase.RESPONSE, result))


@given(st.integers(0, 2**32), st.sampled_from(["resources/read", "resources/subscribe"]))
def test_a_random_path_part_of_a_template_is_refused_and_ids_pass(seed: int, method: str) -> None:
    token = _token(seed)
    assume(looks_random(token))
    stages = TransformStages(STANDARD_TRANSFORMS)
    for uri in (f"notes://n/{token}", f"doc://{token}", f"notes://n/{token}x"):
        assert _read(stages, uri, method) is None, uri  # nobody named these URIs: a lone segment is an id
    templates = [{"uriTemplate": "notes://n/{path}", "name": "n"}, {"uriTemplate": "doc://{docId}", "name": "d"}]
    _listed(stages, "resources/templates/list", {"resourceTemplates": templates})
    _listed(stages, "resources/list", {"resources": [{"uri": f"notes://n/{token}", "name": "n"}]})
    assert _read(stages, f"notes://n/{token}", method) is None  # listed as it is: the upstream's own id
    message = _read(stages, f"notes://n/{quote(token)}x", method)  # its template says a path: words, not a token
    assert message is not None and "at '/uri'" in message and token not in message
    assert _read(stages, f"doc://{token}", method) is None  # an id by its template's name


@given(st.integers(0, 2**32))
def test_template_parts_are_judged_under_their_names(seed: int) -> None:
    token = _token(seed, 32)
    assume(looks_random(token))
    stages = TransformStages(STANDARD_TRANSFORMS)
    templates = [{"uriTemplate": t, "name": t} for t in ("search://{query}", "files://{+path}", "gdrive:///{fileId}")]
    _listed(stages, "resources/templates/list", {"resourceTemplates": templates})
    assert _read(stages, f"search://{token}") is not None  # `query` is no id's name: the bare rule
    assert _read(stages, f"files://docs/{token}/readme.md") is not None  # a path: segment by segment
    assert _read(stages, "files://docs/design/readme.md") is None
    assert _read(stages, f"gdrive:///{token}") is None
    assert _read(stages, f"gdrive:///{DRIVE_ID}") is None


def test_ordinary_addresses_pass_and_the_option_turns_segments_off() -> None:
    stages = TransformStages(STANDARD_TRANSFORMS)
    _listed(stages, "resources/templates/list", {"resourceTemplates": [{"uriTemplate": "files://{+path}"}]})
    for path in (
        "home/me/project/src/main.py",
        "octo/hello/blob/9fceb02d0ae598e95dc970b74767f19372d61af8/README.md",
        "reports/2024/Q3/summary-final-v2.pdf",
        "tables/customer_orders_2024_archive",
        "n/550e8400-e29b-41d4-a716-446655440000",
    ):
        assert _read(stages, f"files://{path}") is None, path
    assert _read(stages, f"files://drive/{DRIVE_ID}") is not None  # a path part: a random token reads as a key
    guard = {"type": "guard_secrets", "action": "reject", "uri_segments": False}
    lenient = TransformStages({**STANDARD_TRANSFORMS, "input_transforms": [guard]})
    _listed(lenient, "resources/templates/list", {"resourceTemplates": [{"uriTemplate": "files://{+path}"}]})
    assert _read(lenient, f"files://drive/{DRIVE_ID}") is None


@given(st.integers(0, 2**32))
def test_a_local_roots_random_segment_is_refused(seed: int) -> None:
    token = _token(seed)
    assume(looks_random(token))
    stages = TransformStages(STANDARD_TRANSFORMS)

    def refusal(uri: str) -> str | None:
        answer = {"roots": [{"uri": "file:///home/me/project", "name": "p"}, {"uri": uri, "name": "k"}]}
        return _message(stages.answer(Invocation("transforms/answers", "roots/list", Phase.RESPONSE, answer)))

    message = refusal(f"file:///home/{token}")
    assert message is not None and "at '/roots/1/uri'" in message and token not in message
    assert refusal(f"gdrive:///{token}") is None  # a root elsewhere may be named by an id


def test_prompt_arguments_and_sampling_answers_refuse_a_sample_shaped_vendor_token() -> None:
    stages = TransformStages(STANDARD_TRANSFORMS)
    prompt = {"method": "prompts/get", "params": {"name": "p", "arguments": {"topic": SAMPLE}}}
    message = _message(stages.request(Invocation("transforms/request", "prompts/get", Phase.REQUEST, prompt)))
    assert message is not None and "at '/arguments/topic'" in message and SAMPLE[4:] not in message
    answer = {"role": "assistant", "content": {"type": "text", "text": f"use {SAMPLE}"}, "model": "m"}
    event = "sampling/createMessage"
    message = _message(stages.answer(Invocation("transforms/answers", event, Phase.RESPONSE, answer)))
    assert message is not None and "at '/content/text'" in message and SAMPLE[4:] not in message
    # in a tool's arguments a document may show a sample: spared there, as before
    call = {"method": "tools/call", "params": {"name": "t", "arguments": {"doc": f"e.g. {SAMPLE}"}}}
    assert _message(stages.request(Invocation("transforms/request", "tools/call", Phase.REQUEST, call))) is None
    plain = {"role": "assistant", "content": {"type": "text", "text": "Set the token in your environment."}}
    assert _message(stages.answer(Invocation("transforms/answers", event, Phase.RESPONSE, plain))) is None


_NAME = st.from_regex(r"[a-z][a-zA-Z0-9_]{0,12}", fullmatch=True)
_VALUE = st.text(alphabet=_BASE62 + "-._~", min_size=1, max_size=40)


@given(st.lists(st.tuples(_NAME, _VALUE), min_size=1, max_size=3, unique_by=lambda p: p[0]), st.text(max_size=8))
@example([("fileId", DRIVE_ID)], "")
def test_a_template_recovers_the_parts_it_spells(parts: list[tuple[str, str]], literal: str) -> None:
    literal = "".join(c for c in literal if c not in "{}/?#")
    template = "x://h/" + "/".join(f"{literal}{{{name}}}" for name, _ in parts)
    uri = "x://h/" + "/".join(f"{literal}{value}" for _, value in parts)
    compiled = template_pattern(template)
    assert compiled is not None
    listed = ListedResources()
    listed.learn("resources/templates/list", {"resourceTemplates": [{"uriTemplate": template}]})
    assert listed.parts(uri) == tuple((name, value) for name, value in parts)
    assert listed.parts("y://other") is None


def test_listing_is_bounded_and_unreadable_templates_are_unused() -> None:
    listed = ListedResources(uris=3, templates=2)
    listed.learn("resources/list", {"resources": [{"uri": f"u://{i}"} for i in range(5)]})
    assert listed.parts("u://0") is None and listed.parts("u://4") == ()
    listed.learn("resources/templates/list", {"resourceTemplates": [{"uriTemplate": t} for t in ("a://{x", "b://{y}")]})
    assert listed.parts("a://{x") is None and listed.parts("b://v") == (("y", "v"),)
    for bad in ("", "plain://no-variables", "a://{x}}", "a://{bad name}", {"uriTemplate": 3}):
        assert template_pattern(bad) is None if isinstance(bad, str) else True
    listed.learn("resources/list", {"resources": "not a list"})
    listed.learn("tools/list", {"resources": [{"uri": "t://x"}]})
    assert listed.parts("t://x") is None
