{#- Tokens and cost at one grain, the one computation behind both cost marts (setting_costs:
    the setting key; agent_costs: suite_id, agent_id). The model declares three CTEs and this
    macro writes the rest of the query from them:

        runs     every attempt (int_setting_runs)
        counted  the counted attempts (counted_attempts)
        points   one row per grain value with the column `points_column`: what a dollar buys
                 (a setting's normalized points, the agent's primary score)

    The mart's columns: the grain, then the sums and means over all attempts, the same over the
    counted ones, cost per success, `points_column` and points_per_dollar. Unknown stays
    unknown: sums and means skip attempts without a recorded value and are null when no attempt
    has one; nothing is ever read as 0. -#}
{% macro cost_summary(grain, points_column) %}
all_attempts as (

    select
        {{ key_columns(grain) }},
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
    group by {{ key_columns(grain) }}

),

counted_attempts as (

    select
        {{ key_columns(grain) }},
        count(*) as n_counted,
        count(cost_usd) as counted_with_cost,
        sum(cost_usd) as counted_cost_total_usd,
        avg(cost_usd) as counted_cost_mean_usd,
        avg(tokens_in) as counted_tokens_in_mean,
        avg(tokens_out) as counted_tokens_out_mean

    from counted
    group by {{ key_columns(grain) }}

),

final as (

    select
        {{ key_columns(grain, 'all_attempts') }},
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
        points.{{ points_column }}::double as {{ points_column }},
        -- what a dollar of one counted attempt buys; unknown or free (0) cost leaves it null
        case
            when counted_attempts.counted_cost_mean_usd > 0
            then points.{{ points_column }} / counted_attempts.counted_cost_mean_usd
        end::double as points_per_dollar

    from all_attempts
    left join counted_attempts on {{ same_key(grain, 'all_attempts', 'counted_attempts') }}
    left join points on {{ same_key(grain, 'all_attempts', 'points') }}

)

select * from final
{%- endmacro %}
