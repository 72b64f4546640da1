-- Per setting (suite, agent, task, budget): successes ÷ attempts, one count per status, and the
-- harness-error ceiling: after that many harness_error attempts the suite's runner gives the
-- setting no more (harness faults are re-run, so a recurring one would re-run it forever).
-- The ceiling is the suite file's (raw.suites, joined on the setting's suite_id). Unknown (null,
-- never reached) when the suite is not loaded (imported results, a removed suite file).
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

suites as (

    select * from {{ ref('stg_raw__suites') }}

),

counts as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        {{ status_counts() }}

    from runs
    group by suite_id, agent_id, task_id, budget_seconds

),

rates as (

    select
        counts.*,
        suites.harness_error_ceiling::integer as harness_error_ceiling

    from counts
    left join suites on counts.suite_id = suites.suite_id

),

final as (

    select
        *,
        coalesce(n_harness_error >= harness_error_ceiling, false) as harness_error_ceiling_reached

    from rates

)

select * from final
