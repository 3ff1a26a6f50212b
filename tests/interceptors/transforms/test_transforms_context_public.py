"""Context signals found on public tool outputs (issue 29's `tool_outputs` corpus): Stripe-shaped object ids, data
URLs and MIME-wrapped base64 of binary data, AWS service-model shapes, code (nested calls, fences, permission words),
SQS receipt handles. Each benign shape passes unchanged through the standard pipeline and the secret next to it is
still caught. The values below are made here for the tests."""

from __future__ import annotations

import base64
import json
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from interceptors.transforms import STANDARD_TRANSFORMS, TransformContext, assemble_output
from interceptors.transforms.channels import transform_tool_result
from interceptors.transforms.context import _binary_blocks, describes

PIPELINE = assemble_output(STANDARD_TRANSFORMS)
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _run(result: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    ctx = TransformContext()
    out, _ = transform_tool_result(result, PIPELINE, ctx)
    return out, ctx.report


def _text_out(text: str) -> str:
    out, _ = _run({"content": [{"type": "text", "text": text}]})
    return str(out["content"][0]["text"]) if out["content"] else ""


@st.composite
def _stripe_ids(draw: st.DrawFn) -> str:
    prefix = draw(st.sampled_from(["fa", "trxn", "credrev", "rc", "obt", "mtr", "vs", "rsl", "ipi", "evt"]))
    mode = draw(st.sampled_from(["", "test_"]))
    body = draw(st.text(alphabet=_ALNUM, min_size=22, max_size=22))
    return f"{prefix}_{mode}1Ab{body}"[: len(prefix) + len(mode) + 25]


@settings(max_examples=60, deadline=None)
@given(_stripe_ids())
def test_a_stripe_object_id_in_a_json_api_object_is_left_alone(object_id: str) -> None:
    text = json.dumps({"object": "treasury.transaction", "financial_account": object_id, "flow": object_id}, indent=2)
    assert _text_out(text) == text


def test_stripe_secrets_and_hex_keys_with_a_prefix_are_still_caught() -> None:
    hexkey = "test_pub_" + "4d6208e5b7f72855d89e0c8d7575190"  # a hex key with a prefix (Lob's shape)
    assert hexkey not in _text_out(f"lobToken={hexkey}")
    secret = "pi_1AbCdEfGhIjKlMnOpQrStUv" + "_secret_" + "Wx2Yz0Uv1St9Qr8Zq8vK2m"
    assert secret not in _text_out(f"client_secret={secret}")


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=40, max_size=600), st.sampled_from(["image/png", "image/gif", "application/octet-stream"]))
def test_a_data_url_of_binary_bytes_is_left_alone(tail: bytes, mime: str) -> None:
    data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + tail).decode()
    text = f'<p><img alt="icon" src="data:{mime};base64,{data}"></p>'
    assert _text_out(text) == text


def test_a_data_url_of_text_or_random_bytes_is_not_spared() -> None:
    secret = "Zq8vK2mX9pL4rT7wB3nF6hJ1cD5sG0aY"
    text_url = "data:text/plain;base64," + base64.b64encode(f"API_KEY={secret}\n".encode()).decode()
    key_url = "data:application/octet-stream;base64," + base64.b64encode(secret.encode()).decode()
    assert _binary_blocks(f'<a href="{text_url}">env</a>') == []
    assert _binary_blocks(f'<a href="{key_url}">key</a>') == []  # its bytes are text: read like any text


@settings(max_examples=30, deadline=None)
@given(st.integers(200, 3000), st.integers(0, 2**32))
def test_the_short_last_line_of_a_mime_wrapped_image_is_left_alone(size: int, seed: int) -> None:
    raw = b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(size)
    wrapped = base64.encodebytes(raw).decode()
    text = 'Content-Type: image/png; name="a.png"\nContent-Transfer-Encoding: base64\n\n' + wrapped + "\n--b1--\n"
    assert _text_out(text) == text


def test_aws_service_model_shapes_describe_and_do_not_hold() -> None:
    model = {
        "GetSecretValueResponse": {
            "type": "structure",
            "members": {
                "SecretString": {"shape": "SecretStringType", "documentation": "<p>The decrypted secret.</p>"},
                "NextToken": {"shape": "NextTokenType"},
            },
        },
        "SecretStringType": {"type": "string", "max": 65536, "min": 0, "sensitive": True},
        "SecretMap": {"type": "map", "key": {"shape": "NameType"}, "value": {"shape": "SecretStringType"}},
    }
    text = json.dumps(model, indent=4)
    assert _text_out(text) == text
    assert describes({"type": "string", "value": "hunter2"}) is None  # a value, not a shape
    assert describes({"type": "map", "value": "hunter2"}) is None
    held = {"SecretString": "Zq8vK2mX9pL4rT7wB3nF6hJ1cD5sG0aY"}
    assert "Zq8vK2mX9pL4rT7w" not in _text_out(json.dumps(held))


def test_code_shapes_are_left_alone_and_a_password_is_not() -> None:
    for code in (
        "            password = bytes(memoryview(password))\n",
        "            password = new(hash_name, password).digest()\n",
        "permissions:\n  contents: read\n  id-token: write\n",
        "Create the secret:\n\n```console\n# kubectl create -f secret.yaml\n```\n",
    ):
        assert _text_out(code) == code, code
    assert "Xk9#mQ2$vB7w" not in _text_out("password = Xk9#mQ2$vB7w\n")


def test_an_sqs_receipt_handle_is_an_id() -> None:
    handle = "MbZj6wDWli+JvwwJaBV+3dcjk2YW2vA3+STFFljTM8tJJg6HRG6PYSasuWXPJB+Cw"
    structured = {"Messages": [{"ReceiptHandle": handle, "Body": "hello"}]}
    out, _ = _run({"content": [], "structuredContent": structured})
    assert out["structuredContent"] == structured
