-- Every setting a suite expects (int_settings_expected: the settings its file lists; for an
-- import, each agent seen × each cell seen), its successes and how many its suite's N still
-- lacks (missing). An agent is covered (ranked in the suite) only when missing = 0 in all its
-- rows of the suite. Also its harness and provider faults and whether they reached the suite's
-- ceilings (setting_success_rates): a setting that lacks successes and has reached one gets no
-- more attempts until that ceiling is raised or the setting is resumed (the ceilings count only
-- the faults no resumption forgave).
with

expected as (

    select * from {{ ref('int_settings_expected') }}

),

covered as (

    select * from {{ ref('int_agents_covered') }}

),

rates as (

    select * from {{ ref('setting_success_rates') }}

),

final as (

    select
        {{ setting_columns('expected') }},
        expected.attempts::bigint as attempts,
        expected.successes::bigint as successes,
        expected.missing::bigint as missing,
        covered.agent_id is not null as agent_is_covered,
        coalesce(rates.n_harness_error, 0)::bigint as n_harness_error,
        coalesce(rates.n_unforgiven_harness_error, 0)::bigint as n_unforgiven_harness_error,
        rates.harness_error_ceiling,
        coalesce(rates.harness_error_ceiling_reached, false) as harness_error_ceiling_reached,
        expected.counted_successes::integer as counted_successes,
        coalesce(rates.n_provider_error, 0)::bigint as n_provider_error,
        coalesce(rates.n_unforgiven_provider_error, 0)::bigint as n_unforgiven_provider_error,
        rates.provider_error_ceiling,
        coalesce(rates.provider_error_ceiling_reached, false) as provider_error_ceiling_reached

    from expected
    left join covered
        on expected.suite_id = covered.suite_id
        and expected.agent_id = covered.agent_id
    left join rates on {{ same_setting('expected', 'rates') }}

)

select * from final
