"""The key's forms (runner/agents/redaction.py): found whole, wherever the reads split them.

The oracle is independent of the redactor: each reflected form knows whether what is left of
it gives the key away (tests/support/hostile_upstream.py: Reflection.leaked).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.agents.redaction import SecretForms, secret_forms
from tests.support.hostile_upstream import reflections

KEY = "sk-test/KEY_0123456789abcdef-XYZ"


def streamed(forms: SecretForms, data: bytes, cuts: list[int]) -> tuple[bytes, int]:
    """``data`` fed to a stream in pieces cut at ``cuts``; the output and the most held."""
    stream = forms.stream()
    out, held, at = b"", 0, 0
    for cut in [*sorted(c for c in set(cuts) if c < len(data)), len(data)]:
        out += stream.feed(data[at:cut])
        at = cut
        held = max(held, at - len(out))
    return out + stream.finish(), held


def body_of(key: str) -> tuple[bytes, list[tuple[int, int, object]]]:
    """A JSON body holding every reflection of ``key``, and where each lies."""
    parts, spans, at = [], [], 0
    for form in reflections(key):
        text = f'{{"{form.name}": "'
        parts.append(text)
        at += len(text)
        spans.append((at, at + len(form.text), form))
        parts.append(form.text + '"}, ')
        at += len(form.text) + 4
    return "".join(parts).encode(), spans


def assert_no_leak(out: bytes, spans: list[tuple[int, int, object]]) -> None:
    for start, end, form in spans:
        got = out[start:end].decode()
        assert not form.leaked(got), (form.name, got)  # type: ignore[attr-defined]


def test_every_reflection_is_found_split_at_every_byte_offset():
    forms = SecretForms(KEY)
    body, spans = body_of(KEY)
    whole = forms.redact(body)
    assert len(whole) == len(body)  # Content-Length stays right
    assert_no_leak(whole, spans)
    for cut in range(len(body) + 1):  # every offset: the same as unsplit
        out, held = streamed(forms, body, [cut])
        assert out == whole, cut
        assert held <= forms.max_held
    out, _ = streamed(forms, body, list(range(len(body))))  # one byte a read
    assert out == whole


def test_a_stream_keeps_back_nothing_that_cannot_grow_into_a_form():
    # An event ends in "\n\n": no form goes on from there, so every event goes out whole
    # at once (no latency); a tail that may be a key's start waits for the next read.
    stream = secret_forms(KEY).stream()
    event = b'data: {"choices": [{"delta": {"content": "it is \\n \\u00e9 50% sk-t"}}]}\n\n'
    assert stream.feed(event) == event
    assert stream.feed(b"data: sk-test/K") == b"data: "
    assert stream.feed(b"EY_0") == b""
    assert stream.feed(b"123!") == b"sk-test/KEY_0123!"  # not the key after all
    assert stream.feed(b"x \\u00") == b"x "
    assert stream.finish() == b"\\u00"


def test_a_form_whose_first_escape_is_far_from_an_earlier_one_is_found():
    # The regex runs only near escapes: a form starting in plain characters whose first
    # escape lies just past the reach of an earlier escape must still be within a span.
    forms = secret_forms(KEY)
    spelled = (KEY[:6] + "".join(f"\\u{ord(c):04x}" for c in KEY[6:])).encode()
    for gap in range(forms.longest - 16, forms.longest + 4):
        data = b"\\u0041" + b"x" * gap + spelled + b" \\u0042"
        out = forms.redact(data)
        assert out[6 + gap : 6 + gap + len(spelled)] == b"*" * len(spelled), gap
        assert out[:6] == data[:6] and out[-7:] == data[-7:]


def test_host_text_gets_a_visible_mark_and_no_key_means_no_change():
    forms = secret_forms(KEY)
    text = json.dumps({"error": f"bad key {KEY}, header Bearer {KEY}"})
    assert forms.redact_text(text) == json.dumps(
        {"error": "bad key [redacted], header Bearer [redacted]"}
    )
    for nothing in (SecretForms(None), SecretForms("EMPTY")):  # no key; a placeholder's
        assert nothing.redact(b"sk-test EMPTY") == b"sk-test EMPTY" and nothing.max_held == 0
        assert nothing.stream().feed(b"abc") == b"abc"


_KEY_CHARS = st.characters(codec="ascii", categories=("L", "N"), include_characters="-_./+=:")
_FILLER = st.lists(
    st.sampled_from(
        [*'ab sk-\\u00%2F*=+/"{}\n', "\\u0073", "%73", "\\/", "sk-", "x" * 97, "x" * 331]
    ),
    max_size=30,
).map("".join)


# 150 generated cases: a key (letters, digits, the punctuation keys and base64 hold), one
# reflection of it between hostile fillers (escapes, percent signs, stars, key-like starts,
# long plain runs),
# cut into reads at any offsets.
@settings(max_examples=150, deadline=None)
@given(
    key=st.text(_KEY_CHARS, min_size=12, max_size=60),
    which=st.integers(min_value=0),
    before=_FILLER,
    after=_FILLER,
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_a_reflection_among_hostile_bytes_is_found_however_the_reads_cut_it(
    key: str, which: int, before: str, after: str, cuts: list[int]
):
    forms = SecretForms(key)
    reflection = reflections(key)[which % len(reflections(key))]
    data = (before + reflection.text + after).encode()
    out, held = streamed(forms, data, cuts)
    assert out == forms.redact(data) and len(out) == len(data)
    assert held <= forms.max_held
    span = out[len(before.encode()) : len(before.encode()) + len(reflection.text)]
    assert not reflection.leaked(span.decode()), (reflection.name, span)
