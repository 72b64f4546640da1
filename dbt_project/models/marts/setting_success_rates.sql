-- Per setting (agent, task, budget): successes ÷ attempts, one count per status, and the
-- harness-error ceiling: after that many harness_error attempts the suite's runner gives the
-- setting no more (harness faults are re-run, so a recurring one would re-run it forever).
-- The ceiling is the suite file's (raw.suites, joined on the attempts' suite_id); attempts of
-- one setting may name several suites (they can share a runs folder): the smallest ceiling
-- applies, as any of them stops the setting there. Unknown (null, never reached) when no
-- attempt names a loaded suite (imported results, attempts outside a suite, a removed suite).
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

suites as (

    select * from {{ ref('stg_raw__suites') }}

),

rates as (

    select
        runs.agent_id,
        runs.task_id,
        runs.budget_seconds,
        {{ status_counts() }},
        min(suites.harness_error_ceiling)::integer as harness_error_ceiling

    from runs
    left join suites on runs.suite_id = suites.suite_id
    group by runs.agent_id, runs.task_id, runs.budget_seconds

),

final as (

    select
        *,
        coalesce(n_harness_error >= harness_error_ceiling, false) as harness_error_ceiling_reached

    from rates

)

select * from final
