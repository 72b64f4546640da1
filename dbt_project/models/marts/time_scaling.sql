-- Per covered agent and budget: the mean normalized points over tasks.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

scaling as (

    select
        agent_id,
        budget_seconds,
        avg(points)::double as mean_points,
        count(*)::bigint as n_tasks

    from points
    group by agent_id, budget_seconds

)

select * from scaling
