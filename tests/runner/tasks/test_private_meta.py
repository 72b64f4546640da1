"""A prepared task's private metadata is read once, into TaskMeta (runner.tasks.private_meta):
any bytes in private/meta.json give the model or one error naming the file, and the model
writes exactly the bytes the dict it replaced did."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from runner.errors import TmlbenchError
from runner.tasks.private_meta import KaggleSource, TaskMeta, TwinSource

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = st.sampled_from(["source", "constant_score", "bayes_optimal_score", "kind", "rows"])
# Objects shaped like the file (its own keys, some with the right kinds of value) and anything else.
CONTENT = st.one_of(
    st.dictionaries(FIELDS, JSON, max_size=3),
    st.fixed_dictionaries(
        {"source": st.fixed_dictionaries({"kind": st.sampled_from(["twin", "kaggle", "x"])})},
        optional={"constant_score": JSON},
    ),
    JSON,
)


def old_writer(meta: dict[str, object]) -> str:
    """What preparation wrote before the model (json.dumps of a dict, keys sorted)."""
    return json.dumps(meta, indent=2, sort_keys=True) + "\n"


def task_folder(tmp_path: Path) -> Path:
    private = tmp_path / "some-task" / "private"
    private.mkdir(parents=True, exist_ok=True)
    return private / "meta.json"


# 200 generated files: JSON documents of any shape, some text that is no JSON.
@settings(max_examples=200, deadline=None)
@given(content=CONTENT, garble=st.booleans())
def test_any_file_gives_the_model_or_an_error_naming_the_file(tmp_path_factory, content, garble):
    path = task_folder(tmp_path_factory.mktemp("meta"))
    text = json.dumps(content)
    path.write_text(text[:-1] if garble and len(text) > 1 else text)
    try:
        meta = TaskMeta.read(path)
    except TmlbenchError as exc:
        assert str(exc).startswith(f"{path}: not readable as the task's metadata (")
        assert str(exc).endswith("re-prepare it: tmlbench tasks prepare some-task")
        return
    assert isinstance(content, dict)  # only an object can be the metadata
    for name in ("constant_score", "bayes_optimal_score"):
        value = getattr(meta, name)
        assert value is None or type(value) is float  # never a string or a boolean


SCORE = st.floats(allow_infinity=False) | st.just(math.nan)
SOURCE = st.one_of(
    st.builds(lambda r, s: {"kind": "twin", "rows": r, "seed": s}, st.integers(0), st.integers()),
    st.builds(
        lambda f, h: {"kind": "kaggle", "file": f, "sha256": h}, st.text(max_size=12), st.text()
    ),
)


# 100 generated metadata files as preparation writes them (a twin's or a download's).
@settings(max_examples=100, deadline=None)
@given(source=SOURCE, constant=SCORE, bayes=st.none() | SCORE)
def test_the_model_writes_the_bytes_of_the_dict_it_replaced(
    tmp_path_factory, source, constant, bayes
):
    old: dict[str, object] = {"source": source, "constant_score": constant}
    if bayes is not None:
        old["bayes_optimal_score"] = bayes
    kind = TwinSource if source["kind"] == "twin" else KaggleSource
    meta = TaskMeta(source=kind(**source), constant_score=constant, bayes_optimal_score=bayes)
    path = task_folder(tmp_path_factory.mktemp("meta"))
    meta.write(path)
    assert path.read_text() == old_writer(old)
    again = TaskMeta.read(path)
    assert again.source == meta.source
    assert again.model_dump_json() == meta.model_dump_json()  # NaN included (as null)


def test_no_file_is_empty_metadata(tmp_path):
    assert TaskMeta.read(task_folder(tmp_path).with_name("none.json")) == TaskMeta()
