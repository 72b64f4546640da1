"""Constant baseline (the floor): predict the training prior (binary) or mean (regression)."""

from __future__ import annotations

import common


def main() -> None:
    ctx = common.start()
    import metrics
    import numpy as np
    import tabular

    tables = tabular.load_tables(ctx)
    fit_index, valid_index = tabular.split_indices(tables.y, tables.task.task_type, ctx.seed)
    value = tabular.constant_prediction(tables, tables.y[fit_index])
    y_valid = tables.y[valid_index]
    validation = metrics.score(tables.metric, y_valid, np.full(y_valid.size, value))
    final = tabular.write_prior_submission(ctx, tables)
    common.log(
        f"[{ctx.clock.elapsed():.1f}s] constant {final:.6g}; {tables.metric} {validation:.6f}"
    )
    common.finish(validation)


if __name__ == "__main__":
    main()
