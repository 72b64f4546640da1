-- The leaderboard page's coverage table, one row per (suite, agent the suite expects): its
-- settings, those that still lack successes, whether it is ranked, its harness and provider
-- faults (neither is the agent's) and its settings stopped at either fault ceiling (see
-- setting_display), with a badge that says it in one line.
with

coverage as (

    select * from {{ ref('coverage') }}

),

per_agent as (

    select
        suite_id,
        agent_id,
        count(*)::bigint as settings,
        count(*) filter (where missing > 0)::bigint as incomplete_settings,
        sum(missing)::bigint as missing_successes,
        bool_and(agent_is_covered) as is_ranked,
        sum(n_harness_error)::bigint as harness_errors,
        count(*) filter (
            where harness_error_ceiling_reached and missing > 0
        )::bigint as stopped_at_harness_error_ceiling,
        sum(n_provider_error)::bigint as provider_errors,
        count(*) filter (
            where provider_error_ceiling_reached and missing > 0
        )::bigint as stopped_at_provider_error_ceiling

    from coverage
    group by suite_id, agent_id

),

final as (

    select
        suite_id,
        agent_id,
        case
            when is_ranked then '✓ ranked'
            else '✗ ' || incomplete_settings || ' of ' || settings || ' settings incomplete'
                || case when stopped_at_harness_error_ceiling > 0
                    then ' · ⊘ ' || stopped_at_harness_error_ceiling
                        || ' stopped at the harness-error ceiling'
                    else ''
                end
                || case when stopped_at_provider_error_ceiling > 0
                    then ' · ⊘ ' || stopped_at_provider_error_ceiling
                        || ' stopped at the provider-error ceiling'
                    else ''
                end
        end as badge,
        settings,
        incomplete_settings,
        missing_successes,
        is_ranked,
        harness_errors,
        stopped_at_harness_error_ceiling,
        provider_errors,
        stopped_at_provider_error_ceiling

    from per_agent

)

select * from final
