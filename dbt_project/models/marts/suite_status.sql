-- One row per suite the marts compute: is its leaderboard final or provisional? A suite is
-- provisional while any setting it expects (its file's; an import's agents × cells seen) still
-- lacks successes (k of n settings complete, k < n): agents are then ranked among those already
-- complete in all their settings only (the unranked may place anywhere once they are), so every
-- rank, score, P(rank) and coverage shown for it is marked provisional. N is the suite's own
-- (counted_successes).
with

suites as (

    select * from {{ ref('int_suites') }}

),

expected as (

    select
        suite_id,
        count(*) as settings_expected,
        count(*) filter (where missing = 0) as settings_complete,
        count(distinct agent_id) as agents_expected

    from {{ ref('int_settings_expected') }}
    group by suite_id

),

ranked as (

    select suite_id, count(*) as agents_ranked
    from {{ ref('int_agents_covered') }}
    group by suite_id

),

final as (

    select
        suites.suite_id,
        suites.from_suite_file,
        suites.counted_successes::integer as counted_successes,
        coalesce(expected.settings_expected, 0)::bigint as settings_expected,
        coalesce(expected.settings_complete, 0)::bigint as settings_complete,
        coalesce(expected.agents_expected, 0)::bigint as agents_expected,
        coalesce(ranked.agents_ranked, 0)::bigint as agents_ranked,
        coalesce(expected.settings_complete < expected.settings_expected, false) as provisional

    from suites
    left join expected on suites.suite_id = expected.suite_id
    left join ranked on suites.suite_id = ranked.suite_id

)

select * from final
