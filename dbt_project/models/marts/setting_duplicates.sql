-- One row per setting (suite, agent, task, budget) with any attempt: how many distinct
-- submissions its fingerprinted attempts made, among all of them and among the counted ones (the
-- first N successes, the setting's score), and how many of them another agent of the suite also
-- submitted for the task. duplicated_counted: two counted attempts submitted the same answer, so
-- the setting's median is not over independent attempts. Unknown stays unknown: attempts without
-- a fingerprint (records before schema 5, failures) are left out, and a flag is null when no
-- attempt it looks at has one.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('int_runs_counted') }}

),

twins as (

    select suite_id, run_id, is_counted, n_other_agent_twins
    from {{ ref('submission_twins') }}

),

all_attempts as (

    select
        {{ setting_columns('runs') }},
        count(*) filter (where runs.status = 'success') as successes,
        count(runs.submission_normalized_sha256) as n_fingerprinted,
        count(distinct runs.submission_normalized_sha256) as n_distinct_submissions,
        count(*) filter (where twins.n_other_agent_twins > 0) as n_shared_with_other_agents,
        count(*) filter (where twins.n_other_agent_twins > 0 and twins.is_counted)
            as n_counted_shared_with_other_agents

    from runs
    left join twins
        on runs.suite_id = twins.suite_id
        and runs.run_id = twins.run_id
    group by {{ setting_columns('runs') }}

),

counted_attempts as (

    select
        {{ setting_columns() }},
        count(*) as n_counted,
        count(submission_normalized_sha256) as n_counted_fingerprinted,
        count(distinct submission_normalized_sha256) as n_distinct_counted_submissions

    from counted
    group by {{ setting_columns() }}

),

final as (

    select
        {{ setting_columns('a') }},
        a.successes::bigint as successes,
        a.n_fingerprinted::bigint as n_fingerprinted,
        a.n_distinct_submissions::bigint as n_distinct_submissions,
        case
            when a.n_fingerprinted > 0 then a.n_distinct_submissions < a.n_fingerprinted
        end as duplicated,
        coalesce(c.n_counted, 0)::bigint as n_counted,
        coalesce(c.n_counted_fingerprinted, 0)::bigint as n_counted_fingerprinted,
        coalesce(c.n_distinct_counted_submissions, 0)::bigint as n_distinct_counted_submissions,
        case
            when c.n_counted_fingerprinted > 0
            then c.n_distinct_counted_submissions < c.n_counted_fingerprinted
        end as duplicated_counted,
        a.n_shared_with_other_agents::bigint as n_shared_with_other_agents,
        a.n_counted_shared_with_other_agents::bigint as n_counted_shared_with_other_agents

    from all_attempts as a
    left join counted_attempts as c on {{ same_setting('a', 'c') }}

)

select * from final
