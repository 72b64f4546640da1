-- The reliability page's reliability under repetition (pass^k and the expected worst points of
-- k attempts): marts.agent_pass_k as the dashboard reads it. The pages read display models
-- only, so a mart can change shape without breaking a page: this model's contract is the
-- page's.
with

agent_pass_k as (

    select * from {{ ref('agent_pass_k') }}

),

final as (

    select
        suite_id,
        agent_id,
        k,
        settings,
        settings_with_pass_k,
        mean_pass_k,
        settings_with_worst_points,
        mean_expected_worst_points

    from agent_pass_k

)

select * from final
