"""Linear baseline: LogisticRegression (binary) or Ridge (regression) on preprocessed features.

Numerics: median imputation + missing indicators + standard scaling. Categoricals (and the
hour/day-of-week/month parts of datetime columns, so the model can fit daily and weekly
profiles): most-frequent imputation + missing indicators + one-hot encoding with rare levels
pooled.
"""

from __future__ import annotations

import time
import warnings

import common


def linear_inputs(frames):
    """One frame for the pipeline: float numerics, and categoricals as object columns."""
    numeric = [c for c in frames.numeric if c not in frames.cyclic]
    categorical = [*frames.categorical, *frames.cyclic]

    def view(frame):
        out = frame[numeric].copy()
        for name in categorical:
            column = frame[name]
            text = column.astype(object) if name in frames.categorical else column.map(_level)
            out[name] = text.where(column.notna()).astype(object)
        return out

    return view(frames.train), view(frames.test), numeric, categorical


def _level(value: float) -> str | None:
    return None if value != value else str(int(value))


def make_pipeline(numeric, categorical, task_type: str, n_rows: int, seed: int):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    numeric_steps = Pipeline(
        [
            (
                "impute",
                SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True),
            ),
            ("scale", StandardScaler()),
        ]
    )
    categorical_steps = Pipeline(
        [
            ("impute", SimpleImputer(strategy="most_frequent", add_indicator=True)),
            (
                "onehot",
                OneHotEncoder(
                    handle_unknown="infrequent_if_exist",
                    min_frequency=max(5, n_rows // 2000),
                    max_categories=60,
                ),
            ),
        ]
    )
    columns = ColumnTransformer(
        [("num", numeric_steps, numeric), ("cat", categorical_steps, categorical)],
        remainder="drop",
    )
    if task_type == "binary":
        model = LogisticRegression(C=1.0, max_iter=500, random_state=seed)
    else:
        model = Ridge(alpha=1.0)
    return Pipeline([("features", columns), ("model", model)])


def predict(pipeline, frame, task_type: str):
    if task_type == "binary":
        return pipeline.predict_proba(frame)[:, 1]
    return pipeline.predict(frame)


def main() -> None:
    ctx = common.start()
    import features
    import metrics
    import tabular

    clock = ctx.clock
    tables = tabular.load_tables(ctx)
    task_type = tables.task.task_type
    prior = tabular.write_prior_submission(ctx, tables)
    frames = features.build_features(tables.train, tables.test)
    common.log(f"[{clock.elapsed():.1f}s] features: {features.describe(frames)}")
    x_train, x_test, numeric, categorical = linear_inputs(frames)
    common.limit_threads(tables.y.size)
    fit_index, valid_index = tabular.split_indices(tables.y, task_type, ctx.seed)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence notes on huge tables are not actionable
        started = time.monotonic()
        pipeline = make_pipeline(numeric, categorical, task_type, fit_index.size, ctx.seed)
        pipeline.fit(x_train.iloc[fit_index], tables.y[fit_index])
        fit_seconds = time.monotonic() - started
        valid_pred = tabular.finalize_predictions(
            tables, predict(pipeline, x_train.iloc[valid_index], task_type), prior
        )
        validation = metrics.score(tables.metric, tables.y[valid_index], valid_pred)
        common.log(f"[{clock.elapsed():.1f}s] fitted; {tables.metric} {validation:.6f}")
        tabular.write_submission(ctx, tables, predict(pipeline, x_test, task_type), prior)

        refit_estimate = 1.5 * fit_seconds * tables.y.size / max(fit_index.size, 1) + 1.0
        if clock.can_start(refit_estimate, start_by=0.7, end_by=0.85):
            full = make_pipeline(numeric, categorical, task_type, tables.y.size, ctx.seed)
            full.fit(x_train, tables.y)
            tabular.write_submission(ctx, tables, predict(full, x_test, task_type), prior)
            common.log(f"[{clock.elapsed():.1f}s] refitted on all {tables.y.size} rows")
    common.finish(validation)


if __name__ == "__main__":
    main()
