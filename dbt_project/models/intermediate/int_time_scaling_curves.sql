-- One row per (suite, covered agent, task) curve of normalized points over the budgets: the rule
-- of time scaling's second half lives here alone. A curve is monotone when its points never
-- decrease as the budget grows (a one-budget curve is monotone); marts.time_scaling_monotone
-- counts these per agent and display.time_scaling_curves shows them.
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
        lag(points) over (
            partition by suite_id, agent_id, task_id order by budget_seconds
        ) as previous_points

    from points

),

curves as (

    select
        suite_id,
        agent_id,
        task_id,
        bool_and(previous_points is null or points >= previous_points) as is_monotone,
        count(*)::bigint as n_budgets,
        list(points order by budget_seconds) as points_by_budget

    from steps
    group by suite_id, agent_id, task_id

)

select * from curves
