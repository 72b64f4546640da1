-- One row per (suite, covered agent, variant): best_budget is the primary score (per task the
-- best budget's points, then the mean over tasks); all_cells and largest_budget are variants.
-- Ranks are within the suite and variant.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

task_best as (

    select * from {{ ref('task_ranks') }}

),

-- the largest budget among the suite's normalized cells (all its tasks)
largest as (

    select suite_id, max(budget_seconds) as budget_seconds
    from points
    group by suite_id

),

variants as (

    select suite_id, agent_id, 'best_budget' as variant, avg(best_points) as score, count(*) as n_cells
    from task_best
    group by suite_id, agent_id

    union all

    select suite_id, agent_id, 'all_cells' as variant, avg(points) as score, count(*) as n_cells
    from points
    group by suite_id, agent_id

    union all

    select
        points.suite_id,
        points.agent_id,
        'largest_budget' as variant,
        avg(points.points) as score,
        count(*) as n_cells

    from points
    inner join largest
        on points.suite_id = largest.suite_id
        and points.budget_seconds = largest.budget_seconds
    group by points.suite_id, points.agent_id

),

ranked as (

    select
        suite_id,
        agent_id,
        variant,
        score::double as score,
        {{ min_rank('score', 'suite_id, variant') }}::bigint as rank,
        n_cells::bigint as n_cells

    from variants

)

select * from ranked
