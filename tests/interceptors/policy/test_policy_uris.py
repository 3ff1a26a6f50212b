"""Resource URIs are judged in one spelling: no other spelling of a denied resource gets past the policy."""

from __future__ import annotations

import posixpath
from urllib.parse import unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors.policy import PolicyEngine
from interceptors.policy.uris import UriRefused, normalize_pattern, normalize_uri, uri_idents
from interceptors.wire import Principal

TEMPLATE = {"resourceTemplates": [{"uriTemplate": "file:///{+path}", "name": "files"}]}
PUBLIC = {"resources": [{"uri": "file:///srv/public.txt", "name": "public"}]}


def engine_denying(*patterns: str, allow: list[str] | None = None) -> PolicyEngine:
    document: dict[str, object] = {"name": "files", "hide_denied": False, "deny_resources": list(patterns)}
    if allow is not None:
        document["allow_resources"] = allow
    engine = PolicyEngine(document)
    engine.learn("resources/list", PUBLIC)
    engine.learn("resources/templates/list", TEMPLATE)
    return engine


ALICE = Principal(type="user", id="alice")

# The 23 spellings of the attack report, and more: each must be judged as the denied file.
SPELLINGS = [
    "file:///srv/secret.txt",
    "file:///srv/./secret.txt",
    "file:///srv//secret.txt",
    "file:////srv/secret.txt",
    "file:///srv/x/../secret.txt",
    "file:///srv/x/y/../../secret.txt",
    "file:///tmp/../srv/secret.txt",
    "file:///../../srv/secret.txt",
    "file:///srv/%73ecret.txt",
    "file:///srv%2Fsecret.txt",
    "file:///srv/%2E/secret.txt",
    "file:///srv/x/%2E%2E/secret.txt",
    "file:///srv/%2573ecret.txt",  # double encoding: refused
    "file:///srv/%252E%252E/srv/secret.txt",
    "FILE:///srv/secret.txt",
    "File:///srv/secret.txt",
    "file://localhost/srv/secret.txt",
    "file://LOCALHOST/srv/secret.txt",
    "file:/srv/secret.txt",
    "file:///srv/secret.txt.",
    "file:///srv/secret.txt%20",
    "file:///srv/secret.txt%2E",
    "file:///srv/secret.txt?download=1",
    "file:///srv/secret.txt#top",
    "file:///srv/secret.txt%00.png",  # NUL truncation: refused
    "file:///srv\\secret.txt",  # a backslash: refused
    "file:///srv/secret.txt%",  # a malformed escape: refused
    "file:///srv/%ff%fe",  # not UTF-8: refused
]


@pytest.mark.parametrize("uri", SPELLINGS)
def test_every_spelling_of_a_denied_file_is_denied(uri: str) -> None:
    engine = engine_denying("file:///srv/secret.txt")
    decision = engine.check_call(ALICE, "resources/read", {"uri": uri})
    assert decision.outcome == "denied", uri
    assert decision.code == -31001


def test_an_ambiguous_uri_is_denied_with_a_clear_error_that_does_not_quote_it() -> None:
    engine = engine_denying()  # nothing denied: the URI itself is the problem
    decision = engine.check_call(ALICE, "resources/read", {"uri": "file:///srv/%2573ecret.txt"})
    assert decision.outcome == "denied"
    assert decision.message == "Access denied: resource URI refused: double percent-encoding"
    assert decision.data == {"reason": "resource URI refused: double percent-encoding", "policy": "files"}
    assert "ecret" not in decision.message
    entry = engine.audit.entries()[-1]
    assert entry["decision"] == "denied" and "ecret" not in entry["name"]
    with_hidden = PolicyEngine({"name": "h"})
    assert not with_hidden.check_call(ALICE, "resources/read", {"uri": "x:/a\\b"}).allowed


def test_other_files_stay_readable_and_the_allow_list_is_not_fooled() -> None:
    engine = engine_denying("file:///srv/secret.txt")
    for uri in ("file:///srv/public.txt", "file:///srv/./public.txt", "file:///srv/secret.txt.bak"):
        assert engine.check_call(ALICE, "resources/read", {"uri": uri}).allowed, uri
    public_only = engine_denying(allow=["file:///srv/public/*"])
    assert public_only.check_call(ALICE, "resources/read", {"uri": "file:///srv/public/a.txt"}).allowed
    for escape in ("file:///srv/public/../secret.txt", "file:///srv/public/%2E%2E/secret.txt"):
        assert not public_only.check_call(ALICE, "resources/read", {"uri": escape}).allowed, escape


def test_globs_are_spelled_like_normal_uris() -> None:
    assert normalize_pattern("FILE:///srv/%73ecret*") == "file:///srv/secret*"
    assert normalize_pattern("file:/srv/*") == "file:///srv/*"
    assert normalize_pattern("!cg://Assets/x") == "!cg://assets/x"
    assert normalize_pattern("get_*") == "get_*"
    engine = engine_denying("FILE:///srv/%73ecret.txt")
    assert not engine.check_call(ALICE, "resources/read", {"uri": "file:///srv/secret.txt"}).allowed


def test_normal_forms() -> None:
    assert normalize_uri("HTTPS://Example.COM./a//b/./c/../d?x=%41#f") == "https://example.com/a/b/d?x=A#f"
    assert normalize_uri("cg://assets/%62astion") == "cg://assets/bastion"
    assert normalize_uri("urn:x:bastion") == "urn:x:bastion"
    assert normalize_uri("file:///dir/") == "file:///dir"  # a trailing slash (or %2F) names the same thing
    assert normalize_uri("file:///dir/sub/..") == "file:///dir"
    assert uri_idents("file:///a?b") == ("file:///a?b", "file:///a")
    assert normalize_uri("https://u%40x:p@Host.example/") == "https://u@x:p@host.example/"
    bad_uris = ("", "no-scheme/path", "file:///a/%2541", "file:///a/%zz", "file:///a/\x00", "file:///a/.../b")
    for bad in (*bad_uris, "https://evil.example%40good.example/", "https://h%2Fx/"):
        with pytest.raises(UriRefused):
            normalize_uri(bad)


# --- the property: any spelling that a path-resolving server reads as the denied file is denied ------------------

SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=8)


def server_reads(uri: str) -> str | None:
    """What a lax file server serves for a URI: decode until stable, backslashes as slashes, dots resolved,
    trailing dots and spaces dropped, query, fragment and anything after a NUL ignored; None: not a file URI."""
    if not uri.lower().startswith("file:"):
        return None
    rest = uri[5:]
    for _ in range(5):
        rest = unquote(rest, errors="replace")
    rest = rest.split("\x00", 1)[0].split("#", 1)[0].split("?", 1)[0].replace("\\", "/")
    if rest.lower().startswith("//localhost/"):
        rest = rest[len("//localhost") :]
    path = posixpath.normpath("/" + rest.lstrip("/"))
    return "/".join(part.rstrip(". ") for part in path.split("/"))


@st.composite
def spellings(draw: st.DrawFn, path: list[str]) -> str:
    """A random spelling of `file:///<path>`: dot segments, detours, repeated slashes, percent-encoding (once or
    twice), encoded slashes, scheme and authority case, trailing dots, a query or fragment, NUL or backslashes."""
    parts: list[str] = []
    for segment in path:
        for _ in range(draw(st.integers(0, 2))):
            parts.append(draw(st.sampled_from([".", "", f"{draw(SEGMENT)}/.."])))
        spelled = segment
        mode = draw(st.sampled_from(["plain", "once", "twice", "dots", "spaces"]))
        if mode == "once":
            hexes = draw(st.sampled_from(["%{:02x}", "%{:02X}"]))
            spelled = "".join(hexes.format(ord(c)) if draw(st.booleans()) else c for c in segment)
        elif mode == "twice":
            spelled = "".join(f"%25{ord(c):02X}" if draw(st.booleans()) else c for c in segment)
        elif mode == "dots":
            spelled = segment + "." * draw(st.integers(1, 3))
        elif mode == "spaces":
            spelled = segment + "%20"
        parts.append(spelled)
    separator = draw(st.sampled_from(["/", "//", "%2F", "%2f", "/./"]))
    body = separator.join(parts)
    scheme = draw(st.sampled_from(["file", "FILE", "File"]))
    authority = draw(st.sampled_from(["///", "//localhost/", "//LocalHost/", ":/", "////"]))
    authority = authority[1:] if authority == ":/" else authority
    tail = draw(st.sampled_from(["", "?x=1", "#frag", "%00.png", "?a=%2e%2e"]))
    return f"{scheme}:{authority}{body}{tail}"


@settings(max_examples=300, deadline=None)
@given(st.lists(SEGMENT, min_size=1, max_size=4), st.data())
def test_any_spelling_that_resolves_to_a_denied_path_is_denied(path: list[str], data: st.DataObject) -> None:
    denied = "file:///" + "/".join(path)
    uri = data.draw(spellings(path))
    if server_reads(uri) != "/" + "/".join(path):
        return  # this spelling names another file (the generator may produce one): not what is tested here
    engine = engine_denying(denied)
    decision = engine.check_call(ALICE, "resources/read", {"uri": uri})
    assert not decision.allowed, uri


@settings(max_examples=200, deadline=None)
@given(st.lists(SEGMENT, min_size=1, max_size=4), st.data())
def test_any_spelling_under_a_denied_directory_is_denied(path: list[str], data: st.DataObject) -> None:
    """`deny_resources: ["file:///<dir>/*"]`: every file a server would serve from under that directory is denied."""
    directory = data.draw(SEGMENT)
    uri = data.draw(spellings([directory, *path]))
    served = server_reads(uri)
    if served is None or not served.startswith(f"/{directory}/"):
        return
    engine = engine_denying(f"file:///{directory}/*")
    assert not engine.check_call(ALICE, "resources/read", {"uri": uri}).allowed, uri
