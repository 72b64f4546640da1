"""A suite's runs on disk: the run folders of settings as prefixes below the runs root (what the
raw load reads of the settings just run), and a suite's records."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from runner.config import Paths
from runner.errors import SpecError, TmlbenchError
from runner.specs.registry import load_suite
from runner.suites.benchmark_settings import SuiteLayout, suite_settings
from runner.suites.suite_runs import run_folder, settings_run_prefixes, suite_records
from tests.support.run_folders import write
from tools.records import make_record

BANK = "bank-customer-churn-ict-u-ai"
S6E1 = "playground-series-s6e1"


def suite_paths(tmp_path: Path, runs_subdir: str = "tiny") -> Paths:
    """The repository's agents and tasks; one suite ``tiny`` and the runs under ``tmp_path``."""
    suites = tmp_path / "suites"
    suites.mkdir(exist_ok=True)
    suite = {
        "id": "tiny", "title": "tiny", "tasks": [BANK, S6E1],
        "agents": ["baseline-constant", "baseline-linear"], "budgets": [30, 60],
        "runs_subdir": runs_subdir,
    }  # fmt: skip
    (suites / "tiny.yaml").write_text(yaml.safe_dump(suite))
    return replace(Paths.from_env(), suites_dir=suites, runs_dir=tmp_path / "runs")


def test_each_setting_is_found_by_the_prefix_of_its_run_ids_below_the_runs_root(tmp_path: Path):
    paths = suite_paths(tmp_path)
    settings = {s.key: s for s in suite_settings(load_suite(paths.suites_dir, "tiny"), paths)}
    chosen = [f"baseline-linear|{BANK}|30", f"baseline-constant|{S6E1}|60"]
    prefixes = settings_run_prefixes(paths, {"tiny": chosen})
    assert prefixes == sorted(f"tiny/{settings[key].run_id_prefix}" for key in chosen)
    # every attempt of a chosen setting is under its prefix, no attempt of another setting is
    for key, setting in settings.items():
        run_path = f"tiny/{setting.plan(7).run_id}"
        assert any(run_path.startswith(p) for p in prefixes) == (key in chosen), key


def test_a_suite_that_keeps_its_runs_in_the_root_gets_bare_prefixes(tmp_path: Path):
    paths = suite_paths(tmp_path, runs_subdir=".")
    key = f"baseline-linear|{BANK}|30"
    (prefix,) = settings_run_prefixes(paths, {"tiny": [key]})
    assert "/" not in prefix and prefix.startswith("baseline-linear")


def test_settings_that_cannot_be_located_are_named(tmp_path: Path):
    paths = suite_paths(tmp_path)
    with pytest.raises(TmlbenchError, match=r"not settings of suite tiny: nobody\|nothing\|1"):
        settings_run_prefixes(paths, {"tiny": [f"baseline-linear|{BANK}|30", "nobody|nothing|1"]})
    with pytest.raises(SpecError, match="gone"):
        settings_run_prefixes(paths, {"gone": [f"baseline-linear|{BANK}|30"]})
    # a runs_subdir is a folder below the root; a link can still take it elsewhere
    (tmp_path / "elsewhere").mkdir()
    paths.runs_dir.mkdir()
    (paths.runs_dir / "tiny").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(TmlbenchError, match=r"keeps its runs in .*elsewhere, not under"):
        settings_run_prefixes(paths, {"tiny": [f"baseline-linear|{BANK}|30"]})


def test_a_suites_records_are_those_of_its_runs_folder(tmp_path: Path):
    paths = suite_paths(tmp_path)
    layout = SuiteLayout.of(load_suite(paths.suites_dir, "tiny"), paths)
    assert suite_records(layout) == []  # no run yet: no folder
    record = make_record(run_id="r1")
    write(layout.runs_dir, record)
    write(paths.runs_dir / "other-suite", make_record(run_id="r2"))
    assert [r.run_id for r in suite_records(layout)] == ["r1"]
    assert (run_folder(layout.runs_dir, "r1") / "record.json").is_file()
