-- Per (suite, agent), over all its attempts in the suite (every setting, every attempt):
-- successes ÷ the agent's own attempts (harness_error and provider_error are not the agent's)
-- and one count per status; and what the gateway saw of the provider over all of them, even on
-- attempts that succeeded (a fault the agent recovered from is still the provider's): faults,
-- interrupted calls, the agent's own excess calls it refused (rate_limited) and the tokens of
-- failed calls. Those sums skip attempts that did not record them (records before schema 6,
-- imports) and are null when none did: unknown, never 0.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

rates as (

    select
        suite_id,
        agent_id,
        {{ status_counts() }},
        sum(provider_faults)::bigint as provider_faults,
        sum(interrupted_calls)::bigint as interrupted_calls,
        sum(rate_limited)::bigint as rate_limited,
        sum(failed_tokens_in)::bigint as failed_tokens_in,
        sum(failed_tokens_out)::bigint as failed_tokens_out

    from runs
    group by suite_id, agent_id

)

select * from rates
