"""Gradient boosting baseline: scikit-learn HistGradientBoosting with early stopping.

Effort scales with the budget (quick < 450 s <= good < 900 s <= thorough): lower learning
rates, more iterations and more hyper-parameter candidates, each fitted on a seeded training
split and early-stopped on the held-out split; the best is refitted on all rows with its best
iteration count. A submission exists from the first second on and is only ever replaced
atomically by a better one. No new work starts after 60% of the budget, and every fit is
sized from the measured cost of the previous ones.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import common

PROBE_ITERATIONS = 5  # the first chunk measures the cost of an iteration
GROWTH = 3  # each warm-start chunk is this many times the iterations done so far


@dataclass(frozen=True)
class Tier:
    name: str
    learning_rate: float
    max_iter: int
    candidates: tuple[dict, ...]
    refine: bool = False  # finally retry the best candidate at a third of the learning rate


_SHAPES = (
    {"max_leaf_nodes": 31, "min_samples_leaf": 20, "l2_regularization": 0.0},
    {"max_leaf_nodes": 15, "min_samples_leaf": 40, "l2_regularization": 1.0},
    {"max_leaf_nodes": 63, "min_samples_leaf": 30, "l2_regularization": 1.0, "max_features": 0.8},
    {"max_leaf_nodes": 31, "min_samples_leaf": 80, "l2_regularization": 3.0, "max_features": 0.6},
    {"max_leaf_nodes": 127, "min_samples_leaf": 50, "l2_regularization": 5.0, "max_features": 0.7},
)


def choose_tier(budget: float) -> Tier:
    if budget < 450:
        return Tier("quick", 0.1, 600, _SHAPES[:3])
    if budget < 900:
        return Tier("good", 0.05, 1500, _SHAPES[:4], refine=True)
    return Tier("thorough", 0.03, 3000, _SHAPES, refine=True)


@dataclass
class FitResult:
    model: object
    params: dict
    learning_rate: float
    best_iter: int
    seconds_per_iter_row: float  # measured training cost, to size later fits
    score: float


def new_model(
    task_type: str,
    params: dict,
    learning_rate: float,
    max_iter: int,
    seed: int,
    *,
    stop_early: bool,
):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingClassifier if task_type == "binary" else HistGradientBoostingRegressor
    return cls(
        learning_rate=learning_rate,
        max_iter=max_iter,
        categorical_features="from_dtype",
        early_stopping=stop_early,
        n_iter_no_change=20,
        warm_start=stop_early,
        random_state=seed,
        **params,
    )


def predict(model, frame, task_type: str):
    if task_type == "binary":
        return model.predict_proba(frame)[:, 1]
    return model.predict(frame)


def fit_candidate(
    ctx, tables, frames, split, params: dict, learning_rate: float, max_iter: int, finish_by: float
) -> FitResult:
    """Early-stopped fit in growing warm-start chunks, ending by ``finish_by`` (elapsed seconds)."""
    import metrics
    import numpy as np
    import tabular

    fit_index, valid_index = split
    x_fit, y_fit = frames.train.iloc[fit_index], tables.y[fit_index]
    x_valid, y_valid = frames.train.iloc[valid_index], tables.y[valid_index]
    task_type = tables.task.task_type
    model = new_model(task_type, params, learning_rate, PROBE_ITERATIONS, ctx.seed, stop_early=True)
    started = time.monotonic()
    model.fit(x_fit, y_fit, X_val=x_valid, y_val=y_valid)
    while model.n_iter_ >= model.max_iter and model.max_iter < max_iter:
        per_iter = (time.monotonic() - started) / model.n_iter_
        affordable = int((finish_by - ctx.clock.elapsed()) / per_iter) - 1
        target = min(max_iter, model.n_iter_ * (GROWTH + 1), model.n_iter_ + affordable)
        if target <= model.n_iter_:
            common.log("  iteration budget reached; keeping the model as is")
            break
        model.max_iter = target
        model.fit(x_fit, y_fit, X_val=x_valid, y_val=y_valid)
    seconds = time.monotonic() - started
    best_iter = max(1, int(np.argmax(model.validation_score_)))
    fallback = tabular.constant_prediction(tables, y_fit)
    prediction = tabular.finalize_predictions(tables, predict(model, x_valid, task_type), fallback)
    score = metrics.score(tables.metric, y_valid, prediction)
    per_iter_row = seconds / max(model.n_iter_, 1) / max(fit_index.size, 1)
    return FitResult(model, params, learning_rate, best_iter, per_iter_row, score)


def search(ctx, tables, frames, split, tier: Tier, prior) -> FitResult | None:
    """Fit the tier's candidates while time allows; the best, its submission written."""
    import metrics
    import tabular

    clock = ctx.clock
    task_type = tables.task.task_type
    fit_index = split[0]
    best: FitResult | None = None
    n_all = tables.y.size
    queue = [(params, tier.learning_rate) for params in tier.candidates]
    for number, (params, rate) in enumerate(queue):
        if best is not None:
            # the next candidate and the final refit must both fit in the remaining time
            refit_cost = best.seconds_per_iter_row * n_all * best.best_iter * 1.2
            slower = best.learning_rate / rate
            fit_cost = best.seconds_per_iter_row * fit_index.size * best.best_iter * 2 * slower
            if not clock.can_start(fit_cost + refit_cost):
                common.log(f"[{clock.elapsed():.1f}s] no time for more candidates")
                break
            finish_by = clock.deadline() - refit_cost
        else:
            # leave room for the refit on all rows (about 1.4 times this fit)
            finish_by = clock.elapsed() + (clock.deadline() - clock.elapsed()) / 2.4
        max_iter = round(tier.max_iter * tier.learning_rate / rate)
        result = fit_candidate(ctx, tables, frames, split, params, rate, max_iter, finish_by)
        common.log(
            f"[{clock.elapsed():.1f}s] candidate {number} {params} rate {rate:.3g}: best iteration "
            f"{result.best_iter}, {tables.metric} {result.score:.6f}"
        )
        if metrics.better(result.score, best.score if best else None, tables.direction):
            best = result
            tabular.write_submission(
                ctx, tables, predict(best.model, frames.test, task_type), prior
            )
        if tier.refine and number == len(tier.candidates) - 1 and best is not None:
            queue.append((best.params, best.learning_rate / 3))
    return best


def refit(ctx, tables, frames, best: FitResult, prior) -> None:
    """Refit the best candidate on all rows, if the clock allows, and write its submission."""
    import tabular

    clock = ctx.clock
    task_type = tables.task.task_type
    n_all = tables.y.size
    iterations = math.ceil(best.best_iter * 1.1) + 1
    refit_cost = best.seconds_per_iter_row * n_all * iterations * 1.3 + 0.5
    if clock.can_start(refit_cost, start_by=0.7, end_by=0.85):
        final = new_model(
            task_type,
            best.params,
            best.learning_rate,
            iterations,
            ctx.seed,
            stop_early=False,
        )
        final.fit(frames.train, tables.y)
        tabular.write_submission(ctx, tables, predict(final, frames.test, task_type), prior)
        common.log(f"[{clock.elapsed():.1f}s] refitted: {iterations} iterations, all rows")
    else:
        common.log(f"[{clock.elapsed():.1f}s] skipping the refit (estimated {refit_cost:.0f}s)")


def main() -> None:
    ctx = common.start()
    import features
    import metrics
    import numpy as np
    import tabular

    clock = ctx.clock
    tables = tabular.load_tables(ctx)
    task_type = tables.task.task_type
    prior = tabular.write_prior_submission(ctx, tables)
    split = tabular.split_indices(tables.y, task_type, ctx.seed)
    fit_index, valid_index = split
    fit_prior = tabular.constant_prediction(tables, tables.y[fit_index])
    validation = metrics.score(
        tables.metric, tables.y[valid_index], np.full(valid_index.size, fit_prior)
    )
    common.log(
        f"[{clock.elapsed():.1f}s] constant submission written ({tables.metric} {validation:.6f})"
    )
    if not clock.can_start(2.0):
        common.finish(validation)
        return

    frames = features.build_features(tables.train, tables.test)
    tier = choose_tier(ctx.budget)
    common.log(f"[{clock.elapsed():.1f}s] features: {features.describe(frames)}")
    threads = common.limit_threads(tables.y.size)
    import sklearn.ensemble  # noqa: F401  (import cost is paid before the clock checks below)

    rate = tier.learning_rate
    common.log(
        f"[{clock.elapsed():.1f}s] tier {tier.name}, learning rate {rate}, {threads} thread(s)"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best = search(ctx, tables, frames, split, tier, prior)
        if best is not None:
            validation = best.score
            refit(ctx, tables, frames, best, prior)
    common.finish(validation)


if __name__ == "__main__":
    main()
