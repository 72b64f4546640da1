-- The cost page's table per setting: marts.setting_costs as the dashboard reads it. The pages
-- read display models only, so a mart can change shape without breaking a page: this model's
-- contract is the page's.
with

setting_costs as (

    select * from {{ ref('setting_costs') }}

),

final as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        attempts,
        successes,
        attempts_with_tokens,
        tokens_in_total,
        tokens_out_total,
        tokens_in_mean,
        tokens_out_mean,
        attempts_with_cost,
        cost_total_usd,
        cost_mean_usd,
        requests_total,
        retries_total,
        provider_seconds_mean,
        tool_seconds_mean,
        n_counted,
        counted_with_cost,
        counted_cost_total_usd,
        counted_cost_mean_usd,
        counted_tokens_in_mean,
        counted_tokens_out_mean,
        cost_per_success_usd,
        points,
        points_per_dollar

    from setting_costs

)

select * from final
