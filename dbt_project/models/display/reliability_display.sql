-- The reliability page, one row per (suite, agent with attempts in it): its success rate (marts.success_rates;
-- its counts per status are in status_counts_display), its run-to-run spread
-- (marts.run_stability) and, when it is ranked, its primary score and rank (marts.leaderboard,
-- best_budget) for performance vs. stability. Faults that are not the agent's are shown apart
-- from its failures: agent_failures are its own attempts that failed; harness_error and
-- provider_error attempts are counted beside them (and re-run), with the provider faults the
-- gateway saw over all its attempts, recovered ones included.
with

rates as (

    select * from {{ ref('success_rates') }}

),

run_stability as (

    select * from {{ ref('run_stability') }}

),

primary_scores as (

    select * from {{ ref('leaderboard') }}
    where variant = 'best_budget'

),

final as (

    select
        rates.suite_id,
        rates.agent_id,
        rates.attempts,
        rates.agent_attempts,
        rates.successes,
        rates.success_rate,
        (rates.agent_attempts - rates.successes)::bigint as agent_failures,
        rates.n_harness_error as harness_errors,
        rates.n_provider_error as provider_errors,
        rates.provider_faults,
        rates.interrupted_calls,
        rates.rate_limited,
        run_stability.rel_iqr as run_rel_iqr,
        run_stability.n_settings as run_settings,
        primary_scores.score,
        primary_scores.rank

    from rates
    left join run_stability
        on rates.suite_id = run_stability.suite_id
        and rates.agent_id = run_stability.agent_id
    left join primary_scores
        on rates.suite_id = primary_scores.suite_id
        and rates.agent_id = primary_scores.agent_id

)

select * from final
