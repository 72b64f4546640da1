-- One row per setting (suite, agent, task, budget) with any attempt: the median, quartiles and
-- spread of its counted attempts (first N successes), and its attempt counts.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('int_runs_counted') }}

),

attempt_counts as (

    select
        {{ setting_columns() }},
        min(metric_direction) as metric_direction,
        count(*) as attempts,
        count(*) filter (where status = 'success') as successes

    from runs
    group by {{ setting_columns() }}

),

counted_stats as (

    select
        {{ setting_columns() }},
        count(*) as n_counted,
        quantile_cont(score, 0.5) as median_score,
        quantile_cont(score, 0.25) as q1,
        quantile_cont(score, 0.75) as q3,
        min(score) as min_score,
        max(score) as max_score,
        quantile_cont(score_hib, 0.5) as median_score_hib

    from counted
    group by {{ setting_columns() }}

),

final as (

    select
        {{ setting_columns('attempt_counts') }},
        attempt_counts.metric_direction,
        counted_stats.median_score::double as median_score,
        counted_stats.q1::double as q1,
        counted_stats.q3::double as q3,
        (counted_stats.q3 - counted_stats.q1)::double as iqr,
        counted_stats.min_score::double as min_score,
        counted_stats.max_score::double as max_score,
        counted_stats.median_score_hib::double as median_score_hib,
        -- run-to-run stability: IQR ÷ |median| (undefined when the median is 0)
        case
            when counted_stats.median_score <> 0
            then (counted_stats.q3 - counted_stats.q1) / abs(counted_stats.median_score)
        end::double as rel_iqr,
        coalesce(counted_stats.n_counted, 0)::bigint as n_counted,
        attempt_counts.attempts::bigint as attempts,
        attempt_counts.successes::bigint as successes

    from attempt_counts
    left join counted_stats on {{ same_setting('attempt_counts', 'counted_stats') }}

)

select * from final
