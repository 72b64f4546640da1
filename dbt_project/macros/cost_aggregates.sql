{#- The cost marts at two grains (setting_costs: agent, task, budget; agent_costs: agent) share
    these aggregates. Unknown stays unknown: sums and means skip attempts without a recorded
    value and are null when no attempt has one; nothing is ever read as 0. -#}

{#- Over every attempt (rows of stg_raw__runs), grouped by the caller. -#}
{% macro attempt_cost_aggregates() %}
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
{% endmacro %}

{#- Over the counted attempts (rows of counted_attempts), grouped by the caller. -#}
{% macro counted_cost_aggregates() %}
        count(*) as n_counted,
        count(cost_usd) as counted_with_cost,
        sum(cost_usd) as counted_cost_total_usd,
        avg(cost_usd) as counted_cost_mean_usd,
        avg(tokens_in) as counted_tokens_in_mean,
        avg(tokens_out) as counted_tokens_out_mean
{% endmacro %}

{#- The contracted columns both marts expose, from the two CTEs above. -#}
{% macro cost_columns(all_attempts='all_attempts', counted='counted_attempts') %}
        {{ all_attempts }}.attempts::bigint as attempts,
        {{ all_attempts }}.successes::bigint as successes,
        {{ all_attempts }}.attempts_with_tokens::bigint as attempts_with_tokens,
        {{ all_attempts }}.tokens_in_total::bigint as tokens_in_total,
        {{ all_attempts }}.tokens_out_total::bigint as tokens_out_total,
        {{ all_attempts }}.tokens_in_mean::double as tokens_in_mean,
        {{ all_attempts }}.tokens_out_mean::double as tokens_out_mean,
        {{ all_attempts }}.attempts_with_cost::bigint as attempts_with_cost,
        {{ all_attempts }}.cost_total_usd::double as cost_total_usd,
        {{ all_attempts }}.cost_mean_usd::double as cost_mean_usd,
        {{ all_attempts }}.requests_total::bigint as requests_total,
        {{ all_attempts }}.retries_total::bigint as retries_total,
        {{ all_attempts }}.provider_seconds_mean::double as provider_seconds_mean,
        {{ all_attempts }}.tool_seconds_mean::double as tool_seconds_mean,
        coalesce({{ counted }}.n_counted, 0)::bigint as n_counted,
        coalesce({{ counted }}.counted_with_cost, 0)::bigint as counted_with_cost,
        {{ counted }}.counted_cost_total_usd::double as counted_cost_total_usd,
        {{ counted }}.counted_cost_mean_usd::double as counted_cost_mean_usd,
        {{ counted }}.counted_tokens_in_mean::double as counted_tokens_in_mean,
        {{ counted }}.counted_tokens_out_mean::double as counted_tokens_out_mean,
        case
            when {{ all_attempts }}.successes_with_cost > 0
            then {{ all_attempts }}.cost_total_usd / {{ all_attempts }}.successes_with_cost
        end::double as cost_per_success_usd
{% endmacro %}

{#- Points bought per dollar: the points (a setting's, or the agent's primary score) ÷ the mean
    cost of the counted attempts; unknown or free (0) cost leaves it null. -#}
{% macro points_per_dollar(points, counted='counted_attempts') %}
        case
            when {{ counted }}.counted_cost_mean_usd > 0
            then {{ points }} / {{ counted }}.counted_cost_mean_usd
        end::double as points_per_dollar
{%- endmacro %}
