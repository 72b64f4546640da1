-- The provisional note above the leaderboard, rank-stability and time-scaling pages (k of n
-- settings complete): marts.suite_status as the dashboard reads it. The pages read display
-- models only, so a mart can change shape without breaking a page: this model's contract is the
-- page's.
with

suite_status as (

    select * from {{ ref('suite_status') }}

),

final as (

    select
        suite_id,
        from_suite_file,
        counted_successes,
        settings_expected,
        settings_complete,
        agents_expected,
        agents_ranked,
        provisional

    from suite_status

)

select * from final
