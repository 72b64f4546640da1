-- One row per setting (suite, agent, task, budget) with any attempt: tokens and cost over all its
-- attempts and over its counted attempts, cost per success and normalized points per dollar.
-- Unknown stays unknown: sums and means skip attempts without a recorded value and are null
-- when no attempt has one; nothing is ever read as 0.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('counted_attempts') }}

),

points as (

    select * from {{ ref('normalized_scores') }}

),

all_attempts as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        {{ attempt_cost_aggregates() }}

    from runs
    group by suite_id, agent_id, task_id, budget_seconds

),

counted_attempts as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        {{ counted_cost_aggregates() }}

    from counted
    group by suite_id, agent_id, task_id, budget_seconds

),

final as (

    select
        all_attempts.suite_id,
        all_attempts.agent_id,
        all_attempts.task_id,
        all_attempts.budget_seconds,
        {{ cost_columns() }},
        points.points::double as points,
        {{ points_per_dollar('points.points') }}

    from all_attempts
    left join counted_attempts
        on all_attempts.suite_id = counted_attempts.suite_id
        and all_attempts.agent_id = counted_attempts.agent_id
        and all_attempts.task_id = counted_attempts.task_id
        and all_attempts.budget_seconds = counted_attempts.budget_seconds
    left join points
        on all_attempts.suite_id = points.suite_id
        and all_attempts.agent_id = points.agent_id
        and all_attempts.task_id = points.task_id
        and all_attempts.budget_seconds = points.budget_seconds

)

select * from final
