-- The settings page's table, one row per setting (suite, agent, task, budget) with attempts (marts.setting_scores): the
-- median and quartiles, and its harness faults against its suite's ceiling. A setting stopped
-- at the ceiling (it lacks successes and its harness faults reached the ceiling: the runner
-- gives it no more attempts) is marked ⛔; the leaderboard page lists those.
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
        coverage.harness_error_ceiling,
        coalesce(coverage.missing, 0)::bigint as missing,
        coalesce(
            coverage.harness_error_ceiling_reached and coverage.missing > 0, false
        ) as stopped_at_harness_error_ceiling

    from scores
    left join coverage
        on scores.suite_id = coverage.suite_id
        and scores.agent_id = coverage.agent_id
        and scores.task_id = coverage.task_id
        and scores.budget_seconds = coverage.budget_seconds

),

final as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        metric_direction,
        median_score,
        q1,
        q3,
        iqr,
        n_counted,
        successes,
        attempts,
        case
            when stopped_at_harness_error_ceiling
                then '⛔ ' || n_harness_error || ' of ' || harness_error_ceiling
                    || ': stopped at the ceiling'
            else n_harness_error || coalesce(' of ' || harness_error_ceiling, '')
        end as harness_errors,
        n_harness_error,
        harness_error_ceiling,
        missing,
        stopped_at_harness_error_ceiling

    from joined

)

select * from final
