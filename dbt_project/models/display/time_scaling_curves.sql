-- The time-scaling page's grid, one row per (ranked agent, task) curve of normalized points
-- over the budgets: monotone when it never gets worse as the budget grows (the rule of
-- marts.time_scaling_monotone, which counts these curves per agent), and its points in order.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

steps as (

    select
        agent_id,
        task_id,
        budget_seconds,
        points,
        lag(points) over (
            partition by agent_id, task_id order by budget_seconds
        ) as previous_points

    from points

),

final as (

    select
        agent_id,
        task_id,
        bool_and(previous_points is null or points >= previous_points) as is_monotone,
        string_agg(printf('%.2f', points), ' → ' order by budget_seconds) as points

    from steps
    group by agent_id, task_id

)

select * from final
