-- Bootstrap, step 2: per suite and replicate, the same rules as the point estimate — the primary
-- points per (task, budget) cell (anchored at the cell's trivial score, which no resampling
-- moves: it is the task's, not an attempt's), best budget per task, mean over tasks — and the
-- replicate's ranks (min ranking on the rounded score).
with

medians as (

    select * from {{ ref('int_bootstrap_setting_medians') }}

),

anchors as (

    select * from {{ ref('int_cell_trivial_scores') }}

),

normalized as (

    select
        medians.suite_id,
        medians.replicate,
        medians.agent_id,
        medians.task_id,
        medians.budget_seconds,
        {{ anchored_points(
            'medians.median_score_hib',
            'anchors.trivial_score_hib',
            cell_columns('medians') ~ ', medians.replicate'
        ) }} as points

    from medians
    left join anchors on {{ same_cell('medians', 'anchors') }}

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
