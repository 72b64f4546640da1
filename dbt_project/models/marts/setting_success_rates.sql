-- Per setting (suite, agent, task, budget): successes ÷ the agent's own attempts, one count per
-- status, and the two fault ceilings: after that many harness_error (the harness's faults) or
-- provider_error (the model provider's) attempts the suite's runner gives the setting no more
-- (both are re-run, never the agent's, so a recurring one would re-run it forever). The ceilings
-- are the suite file's (int_suites, joined on the setting's suite_id); unknown (null, never
-- reached) for a suite without a file (imported results, a removed suite file) or a file loaded
-- before the provider-error ceiling existed.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

suites as (

    select * from {{ ref('int_suites') }}

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
        suites.harness_error_ceiling::integer as harness_error_ceiling,
        suites.provider_error_ceiling::integer as provider_error_ceiling

    from counts
    left join suites on counts.suite_id = suites.suite_id

),

final as (

    select
        * exclude (provider_error_ceiling),
        coalesce(n_harness_error >= harness_error_ceiling, false) as harness_error_ceiling_reached,
        provider_error_ceiling,
        coalesce(n_provider_error >= provider_error_ceiling, false)
            as provider_error_ceiling_reached

    from rates

)

select * from final
