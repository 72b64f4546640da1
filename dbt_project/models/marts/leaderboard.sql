-- One row per (covered agent, variant): best_budget is the primary score (per task the best
-- budget's points, then the mean over tasks); all_cells and largest_budget are variants.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

task_best as (

    select * from {{ ref('task_ranks') }}

),

largest as (

    select max(budget_seconds) as budget_seconds from points

),

variants as (

    select agent_id, 'best_budget' as variant, avg(best_points) as score, count(*) as n_cells
    from task_best
    group by agent_id

    union all

    select agent_id, 'all_cells' as variant, avg(points) as score, count(*) as n_cells
    from points
    group by agent_id

    union all

    select agent_id, 'largest_budget' as variant, avg(points) as score, count(*) as n_cells
    from points
    where budget_seconds = (select budget_seconds from largest)
    group by agent_id

),

ranked as (

    select
        agent_id,
        variant,
        score::double as score,
        {{ min_rank('score', 'variant') }}::bigint as rank,
        n_cells::bigint as n_cells

    from variants

)

select * from ranked
