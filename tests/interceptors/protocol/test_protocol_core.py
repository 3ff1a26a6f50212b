"""The protocol core (`interceptors.protocol`): one definition of framing and its bound, classification, id
recovery, the error object and the protocol versions, shared by every edge, and in step with the SDK."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

import integrations.gateway.framing as gateway_framing
import integrations.gateway.router.eras as router_eras
import integrations.gateway.router.messages as router_messages
import interceptors_server.stdio as server_stdio
from interceptors import InterceptorRpcError
from interceptors.protocol import METHODS, eras, framing, messages
from interceptors_chain import _sdk, stdio_pipe
from tests.conftest import ROOT


def test_the_versions_are_the_sdks() -> None:
    """The core writes the versions out (it imports no SDK); the SDK's published ones must be the same."""
    assert eras.HANDSHAKE_VERSIONS == _sdk.HANDSHAKE_VERSIONS
    assert eras.LATEST_HANDSHAKE == _sdk.LATEST_HANDSHAKE
    assert eras.MODERN_VERSIONS == _sdk.MODERN_VERSIONS
    assert eras.LATEST_MODERN == _sdk.LATEST_MODERN
    assert frozenset(METHODS.names(lambda row: row.cacheable)) == _sdk.CACHEABLE_METHODS


def test_the_sdks_private_tracing_middleware_is_where_we_read_it() -> None:
    """Fails loudly when the SDK moves it (the express lane would then stay off behind a tracing middleware)."""
    assert _sdk.otel_middleware_type() is not None


def test_the_core_imports_no_sdk() -> None:
    code = (
        "import sys, interceptors.protocol, interceptors.protocol.framing, interceptors.protocol.messages, "
        "interceptors.protocol.eras; assert 'mcp' not in sys.modules and 'mcp_types' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_every_edge_uses_the_one_definition() -> None:
    assert gateway_framing.LineSplitter is framing.LineSplitter
    assert gateway_framing.MAX_LINE_BYTES == framing.MAX_LINE_BYTES
    assert server_stdio.MAX_LINE_BYTES == framing.MAX_LINE_BYTES
    assert stdio_pipe.DEFAULT_MAX_LINE_BYTES == framing.MAX_LINE_BYTES
    assert router_messages.parse is messages.parse and router_messages.classify is messages.classify
    assert router_eras.negotiate is eras.negotiate and router_eras.MODERN_VERSIONS is eras.MODERN_VERSIONS
    for module in (stdio_pipe, server_stdio):
        assert not hasattr(module, "LineFramer") and not hasattr(module, "_Oversized")
    assert stdio_pipe.recover_id is messages.recover_id is server_stdio.recover_id


IDS = st.integers(-(2**63), 2**63 - 1) | st.text(max_size=40).filter(
    lambda text: not any(0xD800 <= ord(char) <= 0xDFFF for char in text)
)


@given(request_id=IDS, tail=st.binary(max_size=2000))
def test_the_id_of_a_broken_or_oversized_line_is_recovered_from_its_first_bytes(
    request_id: object, tail: bytes
) -> None:
    head = b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":{"text":"'
    line = head + tail.replace(b'"', b"").replace(b"\\", b"")
    assert messages.recover_id(line) == request_id


def test_only_a_top_level_id_is_recovered() -> None:
    assert messages.recover_id(b'{"jsonrpc":"2.0","result":{"id":5,"x":"') is None
    assert messages.recover_id(b'{"jsonrpc":"2.0","method":"x","params":{"note":"\\"id\\": 7"}, "id": 8, "y":') == 8
    assert messages.recover_id(b"not json at all") is None
    long_prefix = b'{"jsonrpc":"2.0","pad":"' + b"a" * framing.HEAD_BYTES + b'","id":9}'
    assert messages.recover_id(long_prefix) is None  # only the first HEAD_BYTES are read: never the whole line


def test_one_error_object_builder() -> None:
    assert messages.error_object(-32600, "Invalid Request") == {"code": -32600, "message": "Invalid Request"}
    assert messages.error_object(-32602, "Invalid params", {"reason": "r"})["data"] == {"reason": "r"}
    assert InterceptorRpcError(-32603, "m", {"x": 1}).to_wire() == messages.error_object(-32603, "m", {"x": 1})
    line = messages.error_line("a", -32700, "Parse error")
    assert line.endswith(b"\n") and json.loads(line) == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32700, "message": "Parse error"},
    }
    assert messages.error_message(None, -32600, "x") == line_without_newline(messages.error_line(None, -32600, "x"))


def line_without_newline(line: bytes) -> bytes:
    return line[:-1]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
MESSAGES = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0"]) | JSON,
        "id": st.integers() | st.text(max_size=3) | JSON,
        "method": st.sampled_from(["ping", "tools/call", ""]) | JSON,
        "params": st.dictionaries(st.text(max_size=3), JSON, max_size=2) | JSON,
        "result": JSON,
        "error": JSON,
    },
)


@given(value=MESSAGES | JSON)
def test_the_fast_request_check_is_exactly_the_classification(value: object) -> None:
    """`is_request` (the server transport's per-line question) never disagrees with `classify`."""
    kind = messages.classify(value).kind
    assert messages.is_request(value) == (kind in (messages.Kind.REQUEST, messages.Kind.NOTIFICATION))
