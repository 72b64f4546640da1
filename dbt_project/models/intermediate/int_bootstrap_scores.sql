-- Bootstrap, step 2: per suite and replicate, the same rules as the point estimate — min-max
-- normalization per (task, budget) cell, best budget per task, mean over tasks — and the
-- replicate's ranks (min ranking on the rounded score).
with

medians as (

    select * from {{ ref('int_bootstrap_setting_medians') }}

),

normalized as (

    select
        suite_id,
        replicate,
        agent_id,
        task_id,
        budget_seconds,
        {{ min_max_points('median_score_hib', 'suite_id, replicate, task_id, budget_seconds') }} as points

    from medians

),

best_per_task as (

    select suite_id, replicate, agent_id, task_id, max(points) as best_points
    from normalized
    group by suite_id, replicate, agent_id, task_id

),

scores as (

    select suite_id, replicate, agent_id, avg(best_points) as score
    from best_per_task
    group by suite_id, replicate, agent_id

),

ranked as (

    select
        suite_id,
        replicate,
        agent_id,
        score,
        {{ min_rank('score', 'suite_id, replicate') }} as rank

    from scores

)

select * from ranked
