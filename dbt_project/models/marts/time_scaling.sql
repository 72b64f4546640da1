-- Per (suite, covered agent, budget): the mean normalized points over tasks.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

scaling as (

    select
        suite_id,
        agent_id,
        budget_seconds,
        avg(points)::double as mean_points,
        count(*)::bigint as n_tasks

    from points
    group by suite_id, agent_id, budget_seconds

)

select * from scaling
