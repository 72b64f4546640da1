-- The reliability page, one row per (suite, agent with attempts in it): its success rate (marts.success_rates;
-- its counts per status are in status_counts_display), its run-to-run spread
-- (marts.run_stability) and, when it is ranked, its primary score and rank (marts.leaderboard,
-- best_budget) for performance vs. stability.
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
