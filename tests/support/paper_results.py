"""A results database like the paper's, written as the original's code writes it
(tests/support/tml_bench_db.py), in which every figure of its render scripts has data
(tests/warehouse/report/test_against_original.py).

The paper's design (its ``update_profiled1_fiverun_tables.COMPETITIONS`` and ``PROFILES``): the
four competitions (one AUC, three RMSE), three budgets each with its prompt profile
(simple-baseline 240 s, good-baseline 600 s, sota-xgb 1200 s), 5 counted runs per cell. Here
four complete models (``COMPLETE``) and one that is not (``INCOMPLETE``: 3 successes in one
cell, so it is in neither the paper's canonical set nor our leaderboard).

Each cell's setting median is chosen (``MEDIANS``), and its five counted successes are
``median + spread × (-2, -1, 0, 1, 3)`` in a shuffled time order, so the median, quartiles and
IQR are known. What the figures need and the data has:

* failures of every kind the original writes (timeouts, invalid submissions, runtime errors,
  provider errors: ``FAILURES``), before, between and after the successes;
* later successes that must not count (``LATE``: a 6th and 7th success with an absurd score);
* ties: GLM-4.6 and Qwen share the churn 600 s median (tied points), every model shares the
  s6e1 240 s median (an all-equal cell: 0.5 each), and tied best-budget points give tied ranks;
* time scaling that is not monotone, both in the raw medians (gpt-oss on churn 240→600 s,
  GLM-4.6 on traffic 600→1200 s) and in points only (Qwen on s5e10 240→600 s: its RMSE
  improves, 0.062 → 0.061, while it falls from the middle of the cell to its bottom);
* runs written to the database in an order that is not their created_at order, with run ids
  numbered against it.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

from tests.support import tml_bench as tb
from tests.support.tml_bench_original.result import RunResult

GPT = ("chutes", "openai/gpt-oss-120b-TEE")
MINIMAX = ("chutes", "MiniMaxAI/MiniMax-M2.1-TEE")
NEMOTRON = ("chutes", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")

COMPLETE = [tb.GLM, tb.QWEN, GPT, MINIMAX]  # the paper's CANONICAL_MODELS for this database
INCOMPLETE = NEMOTRON
COMPETITIONS = [tb.CHURN, tb.TRAFFIC, tb.S5E10, tb.S6E1]
PROFILES = [("simple-baseline", 240), ("good-baseline", 600), ("sota-xgb", 1200)]

# (model, competition) → setting medians at 240, 600, 1200 s (AUC higher is better; RMSE lower)
MEDIANS: dict[tuple[tuple[str, str], str], tuple[float, float, float]] = {
    (tb.GLM, tb.CHURN): (0.850, 0.870, 0.880),
    (tb.QWEN, tb.CHURN): (0.840, 0.870, 0.875),
    (GPT, tb.CHURN): (0.860, 0.855, 0.890),
    (MINIMAX, tb.CHURN): (0.800, 0.830, 0.860),
    (NEMOTRON, tb.CHURN): (0.820, 0.840, 0.850),
    (tb.GLM, tb.TRAFFIC): (32.0, 31.0, 31.5),
    (tb.QWEN, tb.TRAFFIC): (30.0, 29.0, 28.0),
    (GPT, tb.TRAFFIC): (33.0, 32.0, 30.5),
    (MINIMAX, tb.TRAFFIC): (31.0, 30.0, 29.5),
    (NEMOTRON, tb.TRAFFIC): (29.0, 28.5, 27.0),
    (tb.GLM, tb.S5E10): (0.060, 0.058, 0.057),
    (tb.QWEN, tb.S5E10): (0.062, 0.061, 0.059),
    (GPT, tb.S5E10): (0.059, 0.0585, 0.0575),
    (MINIMAX, tb.S5E10): (0.065, 0.060, 0.0568),
    (NEMOTRON, tb.S5E10): (0.061, 0.060, 0.059),
    (tb.GLM, tb.S6E1): (8.5, 8.2, 8.0),
    (tb.QWEN, tb.S6E1): (8.5, 8.3, 8.1),
    (GPT, tb.S6E1): (8.5, 8.1, 8.15),
    (MINIMAX, tb.S6E1): (8.5, 8.4, 7.9),
    (NEMOTRON, tb.S6E1): (8.5, 8.0, 7.8),
}
# relative spread of each model's counted successes (run-to-run stability differs by model)
SPREAD = {tb.GLM: 0.004, tb.QWEN: 0.010, GPT: 0.020, MINIMAX: 0.006, NEMOTRON: 0.008}
OFFSETS = (-2, -1, 0, 1, 3)
TIME_ORDER = (2, 4, 0, 3, 1)  # the offsets' order in time: the median is not the middle run

# (model, competition, budget) → failed attempts, each placed before the success of that index
FAILURES: dict[tuple[tuple[str, str], str, int], list[tuple[str, int]]] = {
    (tb.GLM, tb.CHURN, 600): [("timeout", 0)],
    (tb.QWEN, tb.TRAFFIC, 240): [("invalid_submission", 2)],
    (tb.QWEN, tb.S6E1, 1200): [("runtime_error", 5)],
    (GPT, tb.CHURN, 240): [("timeout", 1), ("timeout", 4)],
    (GPT, tb.S5E10, 600): [("provider_error", 3), ("runtime_error", 3)],
    (GPT, tb.S6E1, 240): [("invalid_submission", 0)],
    (MINIMAX, tb.TRAFFIC, 1200): [("provider_error", 5)],
    (NEMOTRON, tb.S5E10, 1200): [("timeout", 3), ("timeout", 5)],
}
# (model, competition, budget) → extra successes after the counted five (absurd: never counted)
LATE: dict[tuple[tuple[str, str], str, int], int] = {
    (tb.GLM, tb.CHURN, 1200): 2,
    (MINIMAX, tb.S5E10, 240): 1,
}
SHORT = (NEMOTRON, tb.S5E10, 1200)  # 3 successes only: the model is not complete

START = dt.datetime(2026, 2, 1, 8, 0, tzinfo=dt.timezone(dt.timedelta(hours=-8)))  # US Pacific


def runs() -> list[RunResult]:
    """Every attempt of the database, in the (shuffled) order they are written."""
    out: list[RunResult] = []
    minute = 0
    for (model, comp), medians in MEDIANS.items():
        for (profile, budget), median in zip(PROFILES, medians, strict=True):
            key = (model, comp, budget)
            step = SPREAD[model] * abs(median) * (1 + 0.25 * PROFILES.index((profile, budget)))
            scores = [median + step * OFFSETS[i] for i in TIME_ORDER]
            if key == SHORT:
                scores = scores[:3]
            scores += [0.5 if comp == tb.CHURN else median * 40.0] * LATE.get(key, 0)
            failures = FAILURES.get(key, [])
            attempts: list[tuple[str, float | None]] = []
            for index, score in enumerate([*scores, None]):
                attempts += [(status, None) for status, before in failures if before == index]
                if score is not None:
                    attempts.append(("success", score))
            for n, (status, score) in enumerate(attempts):
                minute += 1
                # numbered against time: ordering by run_id instead of created_at would show
                run_id = f"{model[1].split('/')[-1]}_{comp}_{budget}_{len(attempts) - n}"
                created = (START + dt.timedelta(minutes=minute)).isoformat()
                out.append(
                    tb.result(
                        run_id,
                        created,
                        competition=comp,
                        status=status,
                        score=score,
                        model=model,
                        budget=budget,
                        profile=profile,
                        seed=n,
                    )
                )
    random.Random(28).shuffle(out)
    return out


def paper_database(path: Path) -> Path:
    """The database, written as the original's ensure_db/insert_run/insert_baseline write it."""
    return tb.database(path, runs())
