"""The one table of column labels and formats (app/columns.py) that every page's tables use."""

from __future__ import annotations

import pandas as pd

from app.columns import COLUMNS, FORMATS, KINDS, column_config, label, tooltips


def test_every_column_has_a_human_label_and_a_known_kind():
    for name, column in COLUMNS.items():
        assert column.kind in KINDS, name
        assert column.label and column.label != name and "_" not in column.label, name


def test_a_column_is_formatted_by_its_unit_and_its_values():
    frame = pd.DataFrame(
        {
            "budget_seconds": [240],
            "cost_usd": [None],  # unknown: an empty cell (the table's placeholder), never $0
            "success_rate": [0.5],
            "harness_errors": ["⊘ 3 of 3: stopped at the ceiling"],  # a badge: text
            "score": [0.9],
        }
    )
    config = column_config(frame.astype({"cost_usd": float}), bars=("score",))
    assert config["budget_seconds"]["label"] == "Budget"
    assert config["budget_seconds"]["type_config"]["format"] == "%d s"
    assert config["cost_usd"]["type_config"]["format"] == FORMATS["usd"]
    assert config["success_rate"]["type_config"]["format"] == "percent"
    assert config["harness_errors"]["type_config"]["type"] == "text"
    assert config["score"]["type_config"]["type"] == "progress"


def test_an_unknown_column_is_spelled_out_and_tooltips_are_labelled():
    assert label("some_new_column") == "some new column"
    frame = pd.DataFrame({"agent_id": ["a"], "mean_points": [0.5]})
    assert tooltips(frame, ["agent_id", "mean_points"]) == [
        {"field": "agent_id", "type": "nominal", "title": "Agent"},
        {"field": "mean_points", "type": "quantitative", "title": "Mean points", "format": ".3f"},
    ]
