"""Resource rules judge the same canonical form as path arguments: 56 more spellings of a denied file are
denied (the 23 earlier ones are in tests/interceptors/policy/test_policy_uris.py), and the allowed URIs still read."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.policy import PolicyEngine
from interceptors.policy.uris import normalize_uri, parent_patterns
from interceptors.wire import Principal

ALICE = Principal(type="user", id="alice")
ZWSP, SHY, LONG_S, ZWJ, BOM, WJ = "\u200b", "\u00ad", "\u017f", "\u200d", "\ufeff", "\u2060"


def fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalpha() else c for c in text)


SHADOW = [
    "file:///proc/self/root/etc/shadow",
    "file:///proc/1/root/etc/shadow",
    "file:///proc/thread-self/root/etc/shadow",
    "file:///proc/self/task/1/root/etc/shadow",
    "file:///proc/self/root/proc/self/root/etc/shadow",
    "file:///proc/self/cwd/../../etc/shadow",
    "file:///proc/self/fd/3",
    "file:///etc",  # the denied file's directory: reading it lists the file
    "file:///etc/",
    "file:///etc/.",
    "file:///etc%2F",
    "file:///etc/x/..;/shadow",
    "file:///etc/..;/etc/shadow",
    "file:///tmp/..;/etc/shadow",
    "file:///etc/shadow;x=1",
    "file:///etc;x/shadow",
    "file:///etc/shadow;",
    "file:///etc/shadow/",
    "file:///etc/shadow%2F",
    "file:///etc/shadow%2f",
    "file:///etc/shadow//",
    "file:///etc/shadow::$DATA",
    "file:///etc/shadow:$DATA",
    "file:///etc/shadow::%24DATA",
    "file:///etc/shadow:stream",
    "file:///ETC/SHADOW",
    "file:///etc/Shadow",
    "file:///Etc/shadow",
    "FILE:///ETC/SHADOW",
    "file:///etc/%53hadow",
    f"file:///etc/{fullwidth('shadow')}",
    f"file:///etc/sh{fullwidth('a')}dow",
    "file:///%EF%BD%85tc/shadow",
    f"file:///etc/sha{ZWSP}dow",
    "file:///etc/sha%E2%80%8Bdow",
    f"file:///etc/{ZWSP}shadow",
    f"file:///etc/sha{SHY}dow",
    "file:///etc/sha%C2%ADdow",
    f"file:///etc/{LONG_S}hadow",
    "file:///etc/%C5%BFhadow",
    f"file:///etc/shadow{ZWJ}",
    f"file:///etc/shadow{BOM}",
    f"file:///etc/sha{WJ}dow",
]
SECRET = [
    "file:///proc/self/root/srv/secret.txt",
    "file:///srv",
    "file:///srv/",
    "file:///srv/..;/srv/secret.txt",
    "file:///srv/secret.txt;jsessionid=1",
    "file:///srv/secret.txt/",
    "file:///srv/secret.txt%2F",
    "file:///srv/secret.txt::$DATA",
    "file:///SRV/SECRET.TXT",
    f"file:///srv/{fullwidth('s')}ecret.txt",
    f"file:///srv/sec{ZWSP}ret.txt",
    f"file:///srv/sec{SHY}ret.txt",
    f"file:///srv/{LONG_S}ecret.txt",
]
NEW_SPELLINGS = SHADOW + SECRET


def engine(case_insensitive: bool | None = True) -> PolicyEngine:
    document: dict[str, object] = {
        "name": "files",
        "hide_denied": False,
        "deny_resources": ["file:///etc/shadow", "file:///srv/secret.txt"],
        "paths": {"case_insensitive": case_insensitive},
    }
    built = PolicyEngine(document)
    built.learn("resources/templates/list", {"resourceTemplates": [{"uriTemplate": "file:///{+path}", "name": "f"}]})
    return built


def test_there_are_56_new_spellings() -> None:
    assert len(NEW_SPELLINGS) == len(set(NEW_SPELLINGS)) == 56


@pytest.mark.parametrize("uri", NEW_SPELLINGS)
def test_every_new_spelling_of_a_denied_file_is_refused(uri: str) -> None:
    policy = engine()
    decision = policy.check_call(ALICE, "resources/read", {"uri": uri})
    assert decision.outcome == "denied", uri
    assert decision.code == -31001 and decision.data is not None and decision.data["reason"]
    assert policy.audit.entries()[-1]["decision"] == "denied"


def test_refusals_say_why_without_quoting_the_uri() -> None:
    policy = engine()
    reasons = {
        f"file:///etc/sha{ZWSP}dow": "an invisible character",
        f"file:///etc/{LONG_S}hadow": "a compatibility character",
        "file:///proc/self/cwd/../../etc/shadow": "/proc or /dev/fd links",
        "file:///etc/shadow::$DATA": "resource denied by policy 'files'",
    }
    for uri, why in reasons.items():
        decision = policy.check_call(ALICE, "resources/read", {"uri": uri})
        assert why in decision.message, (uri, decision.message)
        assert "hadow" not in decision.message


def test_allowed_uris_still_read() -> None:
    policy = engine()
    for uri in ("file:///srv/public.txt", "file:///etc/hostname", "file:///srv/sub/", "file:///srv/secret.txt.bak"):
        assert policy.check_call(ALICE, "resources/read", {"uri": uri}).allowed, uri
    assert policy.check_call(ALICE, "resources/read", {"uri": "file:///srv/caf\u00e9.txt"}).allowed  # NFC: fine
    assert policy.check_call(ALICE, "resources/read", {"uri": "file:///srv/cafe\u0301.txt"}).allowed  # NFD: to NFC


def test_case_insensitive_matching_is_on_request() -> None:
    """On a file system that is case-sensitive, `/ETC/SHADOW` is another file: folding is opt-in (the default
    follows the platform: macOS and Windows fold)."""
    assert not engine(True).check_call(ALICE, "resources/read", {"uri": "file:///ETC/SHADOW"}).allowed
    assert engine(False).check_call(ALICE, "resources/read", {"uri": "file:///ETC/SHADOW"}).allowed
    assert not engine(False).check_call(ALICE, "resources/read", {"uri": "file:///etc/shadow"}).allowed


def test_normal_forms_and_parent_patterns() -> None:
    assert normalize_uri("file:///proc/self/root/etc/shadow") == "file:///etc/shadow"
    assert normalize_uri("file:///a/..;/b;x/c::$DATA") == "file:///b/c"
    assert normalize_uri("https://h.example/a;b/c:d/") == "https://h.example/a/c:d"  # streams: file: only
    assert normalize_uri("file:///C:/x") == "file:///C:/x"
    assert parent_patterns("file:///srv/secret.txt") == ("file:///srv",)
    assert parent_patterns("file:///secret") == ("file:///",)
    assert parent_patterns("file:///*/secret") == ()
    assert parent_patterns("cg://assets/bastion*") == ()


# --- the property: the new mangling operations, alone or combined, never reach a denied file ------------------

SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
INVISIBLES = [ZWSP, SHY, ZWJ, BOM, WJ, "\u200c"]


@st.composite
def mangled(draw: st.DrawFn, path: list[str]) -> str:
    """`file:///<path>` spelled with the operations a Windows, Java or Unicode-folding server undoes."""
    parts: list[str] = []
    for segment in path:
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from([f"{draw(SEGMENT)}/..;", "x;y/..", ".;", f"{draw(SEGMENT)};p/.."])))
        how = draw(st.sampled_from(["plain", "invisible", "fullwidth", "long-s", "upper", "param", "stream", "dots"]))
        at = draw(st.integers(0, len(segment)))
        if how == "invisible":
            segment = segment[:at] + draw(st.sampled_from(INVISIBLES)) + segment[at:]
        elif how == "fullwidth":
            segment = "".join(fullwidth(c) if draw(st.booleans()) else c for c in segment)
        elif how == "long-s":
            segment = segment.replace("s", LONG_S)
        elif how == "upper":
            segment = "".join(c.upper() if draw(st.booleans()) else c for c in segment)
        elif how == "param":
            segment += ";" + draw(SEGMENT)
        elif how == "stream":
            segment += draw(st.sampled_from(["::$DATA", ":$DATA", ":x", "::%24DATA"]))
        elif how == "dots":
            segment += draw(st.sampled_from([".", "..", " ", "%20"]))
        parts.append(segment)
    prefix = draw(st.sampled_from(["", "proc/self/root/", "proc/1/root/", "proc/thread-self/root/"]))
    tail = draw(st.sampled_from(["", "/", "%2F", "//", "/."]))
    return f"file:///{prefix}{'/'.join(parts)}{tail}"


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENT, min_size=1, max_size=3).flatmap(lambda p: st.tuples(st.just(p), mangled(p))))
@example((["etc", "shadow"], "file:///proc/self/root/etc/x;y/..;/sha\u200bdow::$DATA/"))
def test_any_mangled_spelling_of_a_denied_resource_is_refused(case: tuple[list[str], str]) -> None:
    path, uri = case
    policy = PolicyEngine({"name": "m", "hide_denied": False, "deny_resources": ["file:///" + "/".join(path)],
                           "paths": {"case_insensitive": True}})  # fmt: skip
    assert not policy.check_call(ALICE, "resources/read", {"uri": uri}).allowed, uri
