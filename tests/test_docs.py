"""The docs stay a map of the repository: the top README is a short front door, every relative
link in the docs leads to a file of the repository (and a heading of it, when it names one),
none leads outside, and the tables that list what a folder holds list all of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.config import REPO_ROOT

# The top README and the docs beside the code it links to.
DOCS = (
    "README.md",
    "agents/README.md",
    "app/README.md",
    "benchmarks/HISTORY.md",
    "benchmarks/README.md",
    "dbt_project/README.md",
    "orchestration/README.md",
    "orchestration/deployments/README.md",
    "runner/README.md",
    "runner/sandbox/README.md",
    "suites/README.md",
    "tasks/README.md",
    "tests/README.md",
    "warehouse/README.md",
)
README_MAX_LINES = 150
RESULT_MAX_CHARS = 120
REPO = REPO_ROOT.resolve()

FENCED_BLOCK = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def links(markdown: str) -> list[str]:
    """Targets of the Markdown links, outside code (a link in a code span is text)."""
    prose = INLINE_CODE.sub("", FENCED_BLOCK.sub("", markdown))
    return LINK.findall(prose)


def heading_slugs(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces as -."""
    slugs = set()
    for line in FENCED_BLOCK.sub("", markdown).splitlines():
        if heading := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line):
            text = heading.group(1).lower().replace("`", "")
            slugs.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return slugs


def broken_links(markdown: str, folder: Path) -> list[str]:
    """What is wrong with each link of `markdown`, a file in `folder` of the repository."""
    problems = []
    for target in links(markdown):
        path_part, _, anchor = target.partition("#")
        path = (folder / path_part).resolve()
        if not path_part:
            if anchor not in heading_slugs(markdown):
                problems.append(f"{target}: this file has no heading #{anchor}")
        elif SCHEME.match(target) or target.startswith("/") or not path.is_relative_to(REPO):
            problems.append(f"{target}: points outside the repository")
        elif not path.exists():
            problems.append(f"{target}: no such file")
        elif anchor and path.is_dir():
            problems.append(f"{target}: a folder has no headings")
        elif anchor and anchor not in heading_slugs(path.read_text(encoding="utf-8")):
            problems.append(f"{target}: {path_part} has no heading #{anchor}")
    return problems


def test_the_top_readme_is_a_front_door_of_at_most_150_lines():
    lines = (REPO_ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines: move the detail into the README beside its code"
    )


@pytest.mark.parametrize("name", DOCS)
def test_every_link_in_the_docs_leads_to_a_file_of_the_repository(name: str):
    doc = REPO_ROOT / name
    assert doc.is_file(), f"{name} is gone: update DOCS and the links to it"
    assert broken_links(doc.read_text(encoding="utf-8"), doc.parent) == [], name


def test_the_link_check_reports_each_kind_of_bad_link_and_no_good_one():
    markdown = (
        "## Two commands\n"
        "[ok](tests/README.md) [ok](#two-commands) [ok](warehouse/README.md#loading) [ok](runner/)\n"
        "[gone](nowhere/README.md) [web](https://example.org) [up](../outside.md)\n"
        "[anchor](tests/README.md#no-such-heading) [self](#no-such-heading)\n"
        "`[code](not/checked.md)`\n```\n[block](not/checked/either.md)\n```\n"
    )
    assert broken_links(markdown, REPO) == [
        "nowhere/README.md: no such file",
        "https://example.org: points outside the repository",
        "../outside.md: points outside the repository",
        "tests/README.md#no-such-heading: tests/README.md has no heading #no-such-heading",
        "#no-such-heading: this file has no heading #no-such-heading",
    ]


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of every Markdown table row, header and rule rows included."""
    return [
        [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        for line in markdown.splitlines()
        if line.startswith("|")
    ]


@pytest.mark.parametrize("folder", ["marts", "display"])
def test_every_mart_and_display_model_has_its_row_with_grain_and_key(folder: str):
    readme = (REPO_ROOT / "dbt_project" / "README.md").read_text(encoding="utf-8")
    rows = {row[0]: row for row in table_rows(readme) if len(row) == 5}
    models = sorted(p.stem for p in (REPO_ROOT / "dbt_project/models" / folder).glob("*.sql"))
    assert models
    missing = [m for m in models if f"`{m}`" not in rows]
    assert missing == [], f"dbt_project/README.md lists no row for models/{folder}/{missing}"
    for model in models:
        _, grain, key, what, _ = rows[f"`{model}`"]
        assert grain and key and what, f"{model}: its grain, key and what it holds"


def test_each_benchmark_has_one_short_latest_result_with_its_script_date_and_machine():
    readme = (REPO_ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    rows = [row for row in table_rows(readme) if len(row) == 6][2:]  # header and rule
    assert rows
    listed = set()
    for what, script, result, target, date, machine in rows:
        assert len(result) <= RESULT_MAX_CHARS, (
            f"{what}: {len(result)} characters, the rest to HISTORY.md"
        )
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) and machine and target, what
        if script != "—":
            name = script.strip("`")
            assert (REPO_ROOT / "benchmarks" / name).is_file() or (REPO_ROOT / name).is_file(), (
                script
            )
            listed.add(name)
    scripts = {p.name for p in (REPO_ROOT / "benchmarks").glob("*.py")} - {"machine.py"}
    assert scripts - listed == set(), "a benchmark script with no row in benchmarks/README.md"


# Paths the docs name that a run makes (git-ignored), or that an example or an error message uses.
NOT_IN_THE_TREE = {
    "warehouse/tmlbench.duckdb",
    "warehouse/reports/",
    "warehouse/reports/demo/",
    "agents/my-agent.yaml",
    "suites/x.yaml",
}
CODE_PATH = re.compile(
    r"`((?:runner|warehouse|orchestration|app|dbt_project|tests|benchmarks"
    r"|agents|tasks|suites)/[^`\s:]*)"
)


@pytest.mark.parametrize("name", DOCS)
def test_every_repository_path_a_doc_names_exists(name: str):
    """A path in code format (`runner/sandbox/seccomp.py`) names a file of today's tree, from the
    repository root or the doc's folder: moving a module means moving the sentences about it."""
    doc = REPO_ROOT / name
    gone = []
    for path in CODE_PATH.findall(doc.read_text(encoding="utf-8")):
        path = path.rstrip(",.;)")
        if re.search(r"[<>*{}…]", path) or path in NOT_IN_THE_TREE:
            continue  # a pattern (`runs/<run_id>/`), an example or a run's output
        if not ((REPO_ROOT / path).exists() or (doc.parent / path).exists()):
            gone.append(path)
    assert gone == [], f"{name} names paths that are not in the repository"
