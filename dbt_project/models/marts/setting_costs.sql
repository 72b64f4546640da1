-- One row per setting (agent, task, budget) with any attempt: tokens and cost over all its
-- attempts and over its counted attempts, cost per success and normalized points per dollar.
-- Unknown stays unknown: sums and means skip attempts without a recorded value and are null
-- when no attempt has one; nothing is ever read as 0.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}

),

counted as (

    select * from {{ ref('counted_attempts') }}

),

points as (

    select * from {{ ref('normalized_scores') }}

),

all_attempts as (

    select
        agent_id,
        task_id,
        budget_seconds,
        count(*) as attempts,
        count(*) filter (where status = 'success') as successes,
        count(*) filter (
            where tokens_in is not null or tokens_out is not null
        ) as attempts_with_tokens,
        sum(tokens_in) as tokens_in_total,
        sum(tokens_out) as tokens_out_total,
        avg(tokens_in) as tokens_in_mean,
        avg(tokens_out) as tokens_out_mean,
        count(cost_usd) as attempts_with_cost,
        sum(cost_usd) as cost_total_usd,
        avg(cost_usd) as cost_mean_usd,
        -- among the attempts whose cost is known: what they cost ÷ how many succeeded
        count(cost_usd) filter (where status = 'success') as successes_with_cost,
        -- how the model was used (llm agents): requests incl. retries, time on each side
        sum(requests) as requests_total,
        sum(retries) as retries_total,
        avg(provider_seconds) as provider_seconds_mean,
        avg(tool_seconds) as tool_seconds_mean

    from runs
    group by agent_id, task_id, budget_seconds

),

counted_attempts as (

    select
        agent_id,
        task_id,
        budget_seconds,
        count(*) as n_counted,
        count(cost_usd) as counted_with_cost,
        sum(cost_usd) as counted_cost_total_usd,
        avg(cost_usd) as counted_cost_mean_usd,
        avg(tokens_in) as counted_tokens_in_mean,
        avg(tokens_out) as counted_tokens_out_mean

    from counted
    group by agent_id, task_id, budget_seconds

),

final as (

    select
        all_attempts.agent_id,
        all_attempts.task_id,
        all_attempts.budget_seconds,
        all_attempts.attempts::bigint as attempts,
        all_attempts.successes::bigint as successes,
        all_attempts.attempts_with_tokens::bigint as attempts_with_tokens,
        all_attempts.tokens_in_total::bigint as tokens_in_total,
        all_attempts.tokens_out_total::bigint as tokens_out_total,
        all_attempts.tokens_in_mean::double as tokens_in_mean,
        all_attempts.tokens_out_mean::double as tokens_out_mean,
        all_attempts.attempts_with_cost::bigint as attempts_with_cost,
        all_attempts.cost_total_usd::double as cost_total_usd,
        all_attempts.cost_mean_usd::double as cost_mean_usd,
        all_attempts.requests_total::bigint as requests_total,
        all_attempts.retries_total::bigint as retries_total,
        all_attempts.provider_seconds_mean::double as provider_seconds_mean,
        all_attempts.tool_seconds_mean::double as tool_seconds_mean,
        coalesce(counted_attempts.n_counted, 0)::bigint as n_counted,
        coalesce(counted_attempts.counted_with_cost, 0)::bigint as counted_with_cost,
        counted_attempts.counted_cost_total_usd::double as counted_cost_total_usd,
        counted_attempts.counted_cost_mean_usd::double as counted_cost_mean_usd,
        counted_attempts.counted_tokens_in_mean::double as counted_tokens_in_mean,
        counted_attempts.counted_tokens_out_mean::double as counted_tokens_out_mean,
        case
            when all_attempts.successes_with_cost > 0
            then all_attempts.cost_total_usd / all_attempts.successes_with_cost
        end::double as cost_per_success_usd,
        points.points::double as points,
        case
            when counted_attempts.counted_cost_mean_usd > 0
            then points.points / counted_attempts.counted_cost_mean_usd
        end::double as points_per_dollar

    from all_attempts
    left join counted_attempts
        on all_attempts.agent_id = counted_attempts.agent_id
        and all_attempts.task_id = counted_attempts.task_id
        and all_attempts.budget_seconds = counted_attempts.budget_seconds
    left join points
        on all_attempts.agent_id = points.agent_id
        and all_attempts.task_id = points.task_id
        and all_attempts.budget_seconds = points.budget_seconds

)

select * from final
