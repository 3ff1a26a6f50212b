"""Resource paths of names and ids are not random tokens (issue 29, precision): an ARN's tail
(`instance/i-0ec4d37eef29972d5`), a `commit/<sha>` or `key-pair/kp-…` path is one run of token characters with
the entropy of a random key, but every part between its slashes says what it is: a word or an id of a known
non-secret shape. A random base64 key has slashes too, between random pieces: the rule never takes one for a path
(seeded, derandomised draws).
"""

from __future__ import annotations

import base64
import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from interceptors.transforms.entities import _NOT_RANDOM_SHAPES, _is_name, _path_of_names, looks_random
from tests.interceptors.transforms.test_transforms_context_public import _text_out

HEX = "0123456789abcdef"
RESOURCES = [("instance", "i"), ("volume", "vol"), ("snapshot", "snap"), ("security-group", "sg"),
             ("network-interface", "eni"), ("image", "ami"), ("key-pair", "key"), ("subnet", "subnet")]  # fmt: skip
REGIONS = ["us-east-1", "eu-west-1", "ap-south-1"]


@pytest.mark.parametrize(
    "token",
    [
        "instance/i-0ec4d37eef29972d5",
        "commit/3f9a1c2e4b5d6f7081928374655647382910abcd",
        "key-pair/key-0a1b2c3d4e5f60718",
        "blob/5d41402abc4b2a76b9719d911017c592/README",
    ],
)
def test_a_path_of_names_and_ids_is_not_random(token: str) -> None:
    assert not looks_random(token)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.sampled_from(RESOURCES), st.sampled_from(REGIONS), st.integers(0, 2**64))
@example(("instance", "i"), "eu-west-1", 0x0EC4D37EEF29972D)
def test_an_ec2_arn_passes_the_standard_pipeline_unchanged(resource: tuple[str, str], region: str, seed: int) -> None:
    rng = random.Random(seed)
    kind, prefix = resource
    account = "".join(rng.choice("0123456789") for _ in range(12))
    arn = f"arn:aws:ec2:{region}:{account}:{kind}/{prefix}-{''.join(rng.choice(HEX) for _ in range(17))}"
    text = f'{{"Arn": "{arn}", "State": "running"}}\n{arn}'
    assert _text_out(text) == text


@settings(max_examples=500, derandomize=True, deadline=None)
@given(st.integers(0, 2**64), st.integers(1, 3))
def test_random_base64_with_slashes_is_not_a_path_of_names(seed: int, slashes: int) -> None:
    """The rule never applies to a random key: `looks_random` judges it as it did before the rule."""
    rng = random.Random(seed)
    token = base64.b64encode(rng.randbytes(30)).decode()
    while token.count("/") != slashes:
        token = base64.b64encode(rng.randbytes(30)).decode()
    assert not _path_of_names(token)


_PART_SAMPLES = ["instance", "i-0ec4d37eef29972d5", "key-pair", "security_group", "README", "a1B2", "x", "3f9a1c2e",
                 "build_3f9a", "sha256-abc", "AAAAB3Nza", "usr", "python3.11", "blob", ""]  # fmt: skip
_PARTS = st.sampled_from(_PART_SAMPLES)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.lists(_PARTS, min_size=1, max_size=5), st.booleans(), st.booleans())
def test_the_quick_shape_test_never_turns_away_a_path_of_names(parts: list[str], lead: bool, trail: bool) -> None:
    """`_PATH_SHAPE` only skips work: the rule answers what its part-by-part reading answers."""
    token = ("/" if lead else "") + "/".join(parts) + ("/" if trail else "")
    named = [part for part in token.split("/") if part]
    exact = len(named) >= 2 and all(_NOT_RANDOM_SHAPES.fullmatch(part) or _is_name(part) for part in named)
    assert _path_of_names(token) is exact
