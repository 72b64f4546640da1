-- One row per (suite, agent) with any attempt: tokens and cost over all its attempts in the suite
-- (every setting) and over its counted attempts, cost per success, and primary score (the
-- suite's) per dollar. Unknown stays unknown: sums and means skip attempts without a recorded
-- value and are null when no attempt has one; nothing is ever read as 0.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('counted_attempts') }}

),

primary_scores as (

    select suite_id, agent_id, score
    from {{ ref('leaderboard') }}
    where variant = 'best_budget'

),

all_attempts as (

    select
        suite_id,
        agent_id,
        {{ attempt_cost_aggregates() }}

    from runs
    group by suite_id, agent_id

),

counted_attempts as (

    select
        suite_id,
        agent_id,
        {{ counted_cost_aggregates() }}

    from counted
    group by suite_id, agent_id

),

final as (

    select
        all_attempts.suite_id,
        all_attempts.agent_id,
        {{ cost_columns() }},
        primary_scores.score::double as score,
        {{ points_per_dollar('primary_scores.score') }}

    from all_attempts
    left join counted_attempts
        on all_attempts.suite_id = counted_attempts.suite_id
        and all_attempts.agent_id = counted_attempts.agent_id
    left join primary_scores
        on all_attempts.suite_id = primary_scores.suite_id
        and all_attempts.agent_id = primary_scores.agent_id

)

select * from final
