-- One row per (suite, covered agent, variant): best_budget is the primary score (per task the
-- best budget's points, then the mean over tasks); all_cells and largest_budget are variants.
-- score and rank are on the primary points (normalized_scores.points, anchored at the trivial
-- prediction); score_paper and rank_paper are the same variant on the paper's points
-- (points_paper), kept for replication. Ranks are within the suite and variant.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

task_best as (

    select
        task_ranks.suite_id,
        task_ranks.agent_id,
        task_ranks.task_id,
        task_ranks.best_points,
        paper.best_points_paper

    from {{ ref('task_ranks') }} as task_ranks
    inner join (
        select suite_id, agent_id, task_id, max(points_paper) as best_points_paper
        from points
        group by suite_id, agent_id, task_id
    ) as paper
        on task_ranks.suite_id = paper.suite_id
        and task_ranks.agent_id = paper.agent_id
        and task_ranks.task_id = paper.task_id

),

-- the largest budget among the suite's normalized cells (all its tasks)
largest as (

    select suite_id, max(budget_seconds) as budget_seconds
    from points
    group by suite_id

),

variants as (

    select
        suite_id,
        agent_id,
        'best_budget' as variant,
        avg(best_points) as score,
        avg(best_points_paper) as score_paper,
        count(*) as n_cells

    from task_best
    group by suite_id, agent_id

    union all

    select
        suite_id,
        agent_id,
        'all_cells' as variant,
        avg(points) as score,
        avg(points_paper) as score_paper,
        count(*) as n_cells

    from points
    group by suite_id, agent_id

    union all

    select
        points.suite_id,
        points.agent_id,
        'largest_budget' as variant,
        avg(points.points) as score,
        avg(points.points_paper) as score_paper,
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
        n_cells::bigint as n_cells,
        score_paper::double as score_paper,
        {{ min_rank('score_paper', 'suite_id, variant') }}::bigint as rank_paper

    from variants

)

select * from ranked
