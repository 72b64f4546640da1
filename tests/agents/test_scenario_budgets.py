"""The CLI tests' budgets grow with the host, not with the CLI (``until_reached``): a scenario a
loaded host's start-up kept a CLI from reaching runs again with twice the budget, up to a most;
one it reached is judged as it ran."""

from __future__ import annotations

from tests.support.cli_agents import until_reached


def test_a_reached_scenario_runs_once_with_its_budget():
    tried: list[int] = []
    outcome, budget = until_reached(lambda b: tried.append(b) or b, lambda b: True, 15)
    assert (outcome, budget, tried) == (15, 15, [15])


def test_an_unreached_scenario_doubles_its_budget_until_it_is_reached():
    tried: list[int] = []
    outcome, budget = until_reached(lambda b: tried.append(b) or b, lambda b: b >= 60, 15)
    assert (outcome, budget, tried) == (60, 60, [15, 30, 60])


def test_a_scenario_never_reached_is_judged_on_its_attempt_at_the_most():
    tried: list[int] = []
    outcome, budget = until_reached(lambda b: tried.append(b) or b, lambda b: False, 25, most=90)
    assert (outcome, budget, tried) == (90, 90, [25, 50, 90])
