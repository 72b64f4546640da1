-- The settings page's counted attempts of one task × budget (box and strip plot, table):
-- marts.counted_attempts as the dashboard reads it. The pages read display models only, so a
-- mart can change shape without breaking a page: this model's contract is the page's.
with

counted_attempts as (

    select * from {{ ref('counted_attempts') }}

),

final as (

    select
        suite_id,
        run_id,
        agent_id,
        task_id,
        budget_seconds,
        created_at,
        success_index,
        score,
        score_hib,
        tokens_in,
        tokens_out,
        cost_usd

    from counted_attempts

)

select * from final
