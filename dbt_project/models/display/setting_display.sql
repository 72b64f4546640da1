-- The settings page's table, one row per setting (suite, agent, task, budget) with attempts (marts.setting_scores): the
-- median and quartiles, and its harness and provider faults (neither is the agent's) against
-- its suite's ceilings. A setting stopped at a ceiling (it lacks successes and its harness or
-- provider faults reached that ceiling: the runner gives it no more attempts) is marked ⊘; the
-- leaderboard page lists those. A ceiling counts the faults no resumption forgave: a resumed
-- setting reads "0 of 3 (3 forgiven)".
with

scores as (

    select * from {{ ref('setting_scores') }}

),

coverage as (

    select * from {{ ref('coverage') }}

),

joined as (

    select
        scores.*,
        coalesce(coverage.n_harness_error, 0)::bigint as n_harness_error,
        coalesce(coverage.n_unforgiven_harness_error, 0)::bigint as n_unforgiven_harness_error,
        coverage.harness_error_ceiling,
        coalesce(coverage.missing, 0)::bigint as missing,
        coalesce(
            coverage.harness_error_ceiling_reached and coverage.missing > 0, false
        ) as stopped_at_harness_error_ceiling,
        coalesce(coverage.n_provider_error, 0)::bigint as n_provider_error,
        coalesce(coverage.n_unforgiven_provider_error, 0)::bigint as n_unforgiven_provider_error,
        coverage.provider_error_ceiling,
        coalesce(
            coverage.provider_error_ceiling_reached and coverage.missing > 0, false
        ) as stopped_at_provider_error_ceiling

    from scores
    left join coverage on {{ same_setting('scores', 'coverage') }}

),

final as (

    select
        {{ setting_columns() }},
        metric_direction,
        median_score,
        q1,
        q3,
        iqr,
        n_counted,
        successes,
        attempts,
        {{ fault_ceiling_label('harness_error') }} as harness_errors,
        n_harness_error,
        harness_error_ceiling,
        missing,
        stopped_at_harness_error_ceiling,
        {{ fault_ceiling_label('provider_error') }} as provider_errors,
        n_provider_error,
        provider_error_ceiling,
        stopped_at_provider_error_ceiling

    from joined

)

select * from final
