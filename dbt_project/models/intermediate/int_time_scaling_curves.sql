-- One row per (suite, covered agent, task) curve over the budgets: the rule of time scaling's
-- second half lives here alone. A curve is monotone when the agent's own higher-is-better median
-- never gets worse as the budget grows (equal is not worse; a one-budget curve is monotone), as
-- the paper's "monotonicity in raw medians (direction-correct)". Not the points: they move with
-- the other agents of the cell, and only the agent's own skill may move its numbers.
-- marts.time_scaling_monotone counts these per agent and display.time_scaling_curves shows them.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

steps as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        points,
        median_score_hib,
        lag(median_score_hib) over (
            partition by suite_id, agent_id, task_id order by budget_seconds
        ) as previous_median_score_hib,
        row_number() over (
            partition by suite_id, agent_id, task_id order by budget_seconds
        ) as budget_index

    from points

),

curves as (

    select
        suite_id,
        agent_id,
        task_id,
        -- a missing median is no evidence of "never worse" (the paper's NaN compares false)
        bool_and(
            budget_index = 1 or coalesce(median_score_hib >= previous_median_score_hib, false)
        ) as is_monotone,
        count(*)::bigint as n_budgets,
        list(points order by budget_seconds) as points_by_budget

    from steps
    group by suite_id, agent_id, task_id

)

select * from curves
