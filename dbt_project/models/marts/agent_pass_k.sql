-- Reliability under repetition per (suite, agent, k): the mean over the agent's settings of
-- setting_pass_k's pass_k and expected_worst_points, as τ-bench averages pass^k over its tasks.
-- A setting enters a k's mean only where the value is defined (at least k attempts of its own,
-- and for the points a normalized cell); the counts say how many did.
with

settings as (

    select * from {{ ref('setting_pass_k') }}

),

final as (

    select
        suite_id,
        agent_id,
        k,
        count(*)::bigint as settings,
        count(pass_k)::bigint as settings_with_pass_k,
        avg(pass_k)::double as mean_pass_k,
        count(expected_worst_points)::bigint as settings_with_worst_points,
        avg(expected_worst_points)::double as mean_expected_worst_points

    from settings
    group by suite_id, agent_id, k

)

select * from final
