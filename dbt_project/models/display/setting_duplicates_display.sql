-- The leaderboard page's list of settings with duplicate submissions: marts.setting_duplicates
-- as the dashboard reads it. The pages read display models only, so a mart can change shape
-- without breaking a page: this model's contract is the page's.
with

setting_duplicates as (

    select * from {{ ref('setting_duplicates') }}

),

final as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        successes,
        n_fingerprinted,
        n_distinct_submissions,
        duplicated,
        n_counted,
        n_counted_fingerprinted,
        n_distinct_counted_submissions,
        duplicated_counted,
        n_shared_with_other_agents,
        n_counted_shared_with_other_agents

    from setting_duplicates

)

select * from final
