-- Per (suite, agent, task): the best normalized points over budgets and the agent's rank on the
-- task among the suite's ranked agents.
with

points as (

    select * from {{ ref('normalized_scores') }}

),

best as (

    select suite_id, agent_id, task_id, max(points)::double as best_points
    from points
    group by suite_id, agent_id, task_id

),

ranked as (

    select
        suite_id,
        agent_id,
        task_id,
        best_points,
        {{ min_rank('best_points', 'suite_id, task_id') }}::bigint as rank

    from best

)

select * from ranked
