"""The router gateway's stdio framing: any chunking of the same bytes gives the same lines; a line past the
bound is reported once and skipped to its newline, never buffered without end."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from interceptors.protocol.framing import OVERSIZED, LineSplitter

lines = st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=12)


@given(lines, st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=8))
def test_any_chunking_gives_the_same_lines(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(part + b"\n" for part in parts)
    splitter = LineSplitter()
    out: list[object] = []
    index = 0
    for cut in cuts * (len(data) // max(1, sum(cuts)) + 1):
        out += splitter.feed(data[index : index + cut])
        index += cut
        if index >= len(data):
            break
    out += splitter.feed(data[index:])
    expected = [part.rstrip(b"\r") for part in parts if part.rstrip(b"\r").strip()]
    assert out == expected
    assert splitter.rest() is None


def test_an_oversized_line_is_reported_once_and_the_next_one_survives() -> None:
    splitter = LineSplitter(max_line=8)
    out = splitter.feed(b"0123456789")  # past the bound before its newline
    out += splitter.feed(b"abcdef")
    out += splitter.feed(b"\nok\n")
    assert out == [OVERSIZED, b"ok"]
    assert splitter.feed(b"0123456789\n") == [OVERSIZED]  # whole in one chunk
    assert splitter.feed(b"last") == [] and splitter.rest() == b"last"
