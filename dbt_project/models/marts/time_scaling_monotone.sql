-- Per covered agent: the share of its (agent, task) curves whose normalized points never
-- decrease as the budget grows (a one-budget curve counts as monotone).
with

points as (

    select * from {{ ref('normalized_scores') }}

),

steps as (

    select
        agent_id,
        task_id,
        points,
        lag(points) over (
            partition by agent_id, task_id order by budget_seconds
        ) as previous_points

    from points

),

curves as (

    select
        agent_id,
        task_id,
        bool_and(previous_points is null or points >= previous_points) as is_monotone

    from steps
    group by agent_id, task_id

),

shares as (

    select
        agent_id,
        count(*)::bigint as curves,
        count(*) filter (where is_monotone)::bigint as monotone_curves,
        (count(*) filter (where is_monotone) / count(*))::double as share_monotone

    from curves
    group by agent_id

)

select * from shares
