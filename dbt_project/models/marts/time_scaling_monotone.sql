-- Per (suite, covered agent): the share of its (agent, task) curves whose own higher-is-better
-- median never gets worse as the budget grows (the curves and their rule: int_time_scaling_curves).
with

curves as (

    select * from {{ ref('int_time_scaling_curves') }}

),

shares as (

    select
        suite_id,
        agent_id,
        count(*)::bigint as curves,
        count(*) filter (where is_monotone)::bigint as monotone_curves,
        (count(*) filter (where is_monotone) / count(*))::double as share_monotone

    from curves
    group by suite_id, agent_id

)

select * from shares
