-- One row per (suite, attempt) that shares its submission with at least one other attempt of the
-- same suite and task: same canonical fingerprint (submission_normalized_sha256, set for
-- successful attempts), so the same answer however it was re-serialised. The run explorer lists
-- an attempt's twins by selecting the rows of its (suite_id, task_id,
-- submission_normalized_sha256) group: window counts and one row per attempt, never a pair table
-- (a deterministic agent's thousands of identical attempts would make one quadratic).
with

runs as (

    select * from {{ ref('int_setting_runs') }}
    where submission_normalized_sha256 is not null

),

counted as (

    select suite_id, run_id, success_index from {{ ref('int_runs_counted') }}

),

-- the (suite, task, fingerprint) keys of two or more attempts: one hash aggregation, so that the window
-- counts below only sort the (usually few) attempts that have a twin
duplicated as (

    select suite_id, task_id, submission_normalized_sha256
    from runs
    group by suite_id, task_id, submission_normalized_sha256
    having count(*) >= 2

),

members as (

    select runs.*
    from runs
    inner join duplicated
        on runs.suite_id = duplicated.suite_id
        and runs.task_id = duplicated.task_id
        and runs.submission_normalized_sha256 = duplicated.submission_normalized_sha256

),

sized as (

    select
        members.*,
        count(*) over (
            partition by members.suite_id, members.task_id, members.submission_normalized_sha256
        ) as group_attempts,
        count(*) over (
            partition by
                members.suite_id, members.task_id, members.submission_normalized_sha256,
                members.agent_id
        ) as agent_attempts,
        count(*) over (
            partition by
                members.suite_id, members.task_id, members.submission_normalized_sha256,
                members.agent_id, members.budget_seconds
        ) as setting_attempts

    from members

),

final as (

    select
        sized.suite_id,
        sized.run_id,
        sized.task_id,
        sized.submission_normalized_sha256,
        sized.agent_id,
        sized.budget_seconds,
        sized.created_at,
        sized.status,
        sized.score::double as score,
        sized.submission_sha256,
        (counted.run_id is not null) as is_counted,
        counted.success_index::bigint as success_index,
        (sized.group_attempts - 1)::bigint as n_twins,
        (sized.setting_attempts - 1)::bigint as n_same_setting_twins,
        (sized.group_attempts - sized.agent_attempts)::bigint as n_other_agent_twins

    from sized
    left join counted
        on sized.suite_id = counted.suite_id
        and sized.run_id = counted.run_id

)

-- stored by group: the run explorer's lookup of one group reads few of DuckDB's row groups
select * from final
order by suite_id, task_id, submission_normalized_sha256, created_at, run_id
