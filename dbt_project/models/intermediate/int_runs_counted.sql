-- The counted attempts: the first N successes of each setting (suite, agent, task, budget),
-- ordered by created_at and then run_id, N being the suite's (int_suites: its file's `attempts`,
-- the paper's 5 for an import). Later successes and failures never count, and a suite
-- counts its own runs only. The submission's canonical fingerprint rides along: two counted
-- attempts with the same one are a replayed answer (marts.setting_duplicates).
with

successes as (

    select
        {{ setting_columns() }},
        run_id,
        created_at,
        score,
        score_hib,
        submission_normalized_sha256,
        row_number() over (
            partition by {{ setting_columns() }}
            order by created_at, run_id
        ) as success_index

    from {{ ref('int_setting_runs') }}
    where status = 'success'

),

suites as (

    select suite_id, counted_successes from {{ ref('int_suites') }}

),

counted as (

    select successes.*
    from successes
    inner join suites on successes.suite_id = suites.suite_id
    where successes.success_index <= suites.counted_successes

)

select * from counted
