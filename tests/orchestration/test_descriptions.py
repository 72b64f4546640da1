"""What the Dagster UI shows about tmlbench's definitions tells the truth about the thing shown.

The UI renders every description (an asset's, a table column's, a check's, a job's, a schedule's,
a sensor's) as Markdown and drops raw HTML (react-markdown with rehype-sanitize, dagster-webserver
1.13): ``<data>`` outside a code span disappears from the page. dagster-dbt's default description
appends a model's whole SQL. And the Runs page shows a named job's name, so the jobs we launch for
a suite carry the suite in their name and in the ``tmlbench/suite`` tag. Fast: the definitions
of the repository's suite files, nothing runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html import unescape
from pathlib import Path

import dagster as dg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runner.config import REPO_ROOT
from warehouse.dbt import DBT_PROJECT_DIR

# integration: the definitions over a fresh dbt parse (dbt_manifest); and it reads the
# repository's dbt_project/target/manifest.json, so not while a `tmlbench warehouse build`
# rewrites it (tests/README.md)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("dbt_project_target")]

# What CommonMark may read as raw HTML (a tag, a comment, a declaration), and `<data_subdir>`
# too: any `<` that opens a word and is closed by `>`. A comparison (`k < n`) is not one.
RAW_TAG = re.compile(r"<[A-Za-z/!?][^<>]*>")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)  # `x`, ``x``, ```sql …```


def raw_tags(text: str | None) -> list[str]:
    """The raw ``<...>`` of ``text`` outside code spans: what the UI would not show as written."""
    return RAW_TAG.findall(CODE_SPAN.sub("", text or ""))


@pytest.fixture(scope="module")
def defs(dbt_manifest: Path) -> dg.Definitions:
    from orchestration.definitions import build_defs
    from orchestration.suites import suite_files

    suites, skipped = suite_files(REPO_ROOT / "suites")
    assert suites and not skipped
    return build_defs(suites)


def descriptions(defs: dg.Definitions) -> Iterator[tuple[str, str | None]]:
    """Every description of ours the UI renders, with where it is shown."""
    graph = defs.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        yield f"asset {key.to_user_string()}", node.description
        schema = node.metadata.get("dagster/column_schema")
        for column in schema.columns if schema else ():
            yield f"column {key.to_user_string()}.{column.name}", column.description
    for definition in [*defs.assets, *(defs.asset_checks or [])]:
        assert isinstance(definition, dg.AssetsDefinition)
        for check in definition.check_specs:
            yield f"check {check.key.asset_key.to_user_string()}:{check.name}", check.description
    for job in defs.jobs or []:
        yield f"job {job.name}", job.description
    for schedule in defs.schedules or []:
        assert isinstance(schedule, dg.ScheduleDefinition)
        yield f"schedule {schedule.name}", schedule.description
    for sensor in defs.sensors or []:
        yield f"sensor {sensor.name}", sensor.description


def test_the_rule_finds_raw_tags_outside_code_spans_only():
    assert raw_tags("under <runs>/<runs_subdir>/") == ["<runs>", "<runs_subdir>"]
    assert raw_tags("a <!-- comment --> and </b>") == ["<!-- comment -->", "</b>"]
    assert raw_tags("under `<runs>/<runs_subdir>/`; k < n, a <= b, x -> y") == []
    assert raw_tags("```sql\nselect a <b> from t\n```") == []
    assert raw_tags("`a` <b> ``c`d``") == ["<b>"]
    assert raw_tags(None) == []


def test_every_description_of_ours_reads_as_written(defs: dg.Definitions):
    shown = dict(descriptions(defs))
    # the rule looks at what it should (else it would pass on nothing)
    assert "`<data>/<data_subdir>/tasks/<task>`" in (shown["asset demo/prepared_tasks"] or "")
    assert "`<runs>/<runs_subdir>/`" in (shown["asset tml-v1/agent_runs"] or "")
    assert "`suites/<id>.yaml`" in (shown["column marts/leaderboard.suite_id"] or "")
    assert any(where.startswith("check ") and text for where, text in shown.items())
    assert {"job demo_agent_runs", "schedule nightly_demo", "sensor sync_suite_partitions"} <= set(
        shown
    )
    unreadable = {where: raw_tags(text) for where, text in shown.items() if raw_tags(text)}
    assert unreadable == {}, "put paths and placeholders in `code spans`"


def test_every_dbt_model_is_described_by_its_yaml_never_its_sql(defs: dg.Definitions):
    from orchestration.assets.dbt import TmlbenchDbtTranslator

    manifest = json.loads((DBT_PROJECT_DIR / "target" / "manifest.json").read_text())
    graph = defs.resolve_asset_graph()
    models = [
        graph.get(key)
        for key in graph.get_all_asset_keys()
        if "dagster_dbt/unique_id" in graph.get(key).metadata
    ]
    assert len(models) >= 40
    for node in models:
        props = manifest["nodes"][node.metadata["dagster_dbt/unique_id"]]
        yaml_description = props["description"].strip()
        where = f"{props['original_file_path']} (and its .yml)"
        assert yaml_description, f"{where}: the model has no description; add one in its YAML"
        assert node.description == (
            f"{yaml_description}\n\nDefined in `dbt_project/{props['original_file_path']}`."
        ), where
        assert props["raw_code"].strip() not in node.description
        assert "Raw SQL" not in node.description and "```" not in node.description

    # a model without a description says so, and where to add one (never its SQL)
    bare = {
        "resource_type": "model", "name": "new_model", "description": "",
        "original_file_path": "models/marts/new_model.sql", "raw_code": "select 1 as x",
    }  # fmt: skip
    text = TmlbenchDbtTranslator().get_description(bare)
    assert "no description yet" in text and "`dbt_project/models/marts/new_model.sql`" in text
    assert "select 1" not in text and raw_tags(text) == []


def test_every_run_launched_for_a_suite_names_the_suite(defs: dg.Definitions):
    """The suite's job (Launchpad, the nightly schedule) and `make run`'s in-process runs. A
    Materialize click or a backfill runs Dagster's implicit asset job: the Runs page shows its
    assets (``<stem>/agent_runs``), and the asset tags the run (test_orchestration.py)."""
    from orchestration.materialize import suite_steps
    from orchestration.partitions import SuiteKeys
    from orchestration.suites import SuiteFile

    jobs = {job.name: job for job in defs.jobs or []}
    for stem in ("demo", "tml-v1", "tml-v1-llm", "tml-v1-kilo"):
        suite = SuiteFile(stem)
        job = jobs[f"{suite.ident}_agent_runs"]
        assert job.tags == {"tmlbench/suite": stem}
        assert job.selection.resolve(defs.resolve_asset_graph()) == {suite.agent_runs_key}  # type: ignore[union-attr]
        assert defs.get_schedule_def(f"nightly_{suite.ident}").job_name == job.name

    suite = SuiteFile("tml-v1-llm")
    keys = SuiteKeys(tasks=("t1", "t2"), agent_budgets=("a@30s",))
    names = [step.job_name for step in suite_steps(suite, keys)]
    assert names == ["tml_v1_llm_prepare_tasks", "tml_v1_llm_agent_runs", "tml_v1_llm_warehouse"]


# 300 generated notes (any Unicode text, Markdown's punctuation favoured), each rendered by a
# CommonMark parser with GFM tables (markdown-it-py, as the UI's remark-gfm reads them).
@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.characters(blacklist_characters="\x00") | st.sampled_from("<>|`*_[]()!&#\\~-"),
        max_size=120,
    )
)
def test_a_records_note_reads_as_written_in_the_attempts_table(note: str):
    """An attempt's note (an agent's or a provider's words) is one table cell whose rendered
    text is the note itself, whitespace collapsed, cut at 80 characters: no tag, no emphasis,
    no link, no column break from what a sandbox wrote."""
    from markdown_it import MarkdownIt

    from orchestration.metadata import cell

    html = MarkdownIt("commonmark").enable("table").render(f"| n |\n|---|\n| {cell(note, 80)} |")
    cells = re.findall(r"<td>(.*?)</td>", html, re.DOTALL)
    assert len(cells) == 1, html
    assert unescape(cells[0]) == " ".join(note.split())[:80]
