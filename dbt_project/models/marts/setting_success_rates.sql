-- Per setting (suite, agent, task, budget): successes ÷ the agent's own attempts, one count per
-- status, and the two fault ceilings: after that many harness_error (the harness's faults) or
-- provider_error (the model provider's) attempts the suite's runner gives the setting no more
-- (both are re-run, never the agent's, so a recurring one would re-run it forever). The ceilings
-- are the suite file's (int_suites, joined on the setting's suite_id); unknown (null, never
-- reached) for a suite without a file (imported results, a removed suite file) or a file loaded
-- before the provider-error ceiling existed.
--
-- A ceiling counts only the faults no resumption forgave, as the runner's do (runner.suites.benchmark_settings):
-- resuming a stopped setting forgives the faults recorded so far, by run id, in the resumption
-- log of the suite's runs folder (stg_raw__resumptions); n_harness_error / n_provider_error still
-- count every fault recorded.
with

forgiven as (

    select distinct run_space, run_id from {{ ref('stg_raw__resumptions') }}

),

runs as (

    select
        runs.*,
        forgiven.run_id is not null as forgiven

    from {{ ref('int_setting_runs') }} as runs
    left join forgiven
        on runs.run_space = forgiven.run_space
        and runs.run_id = forgiven.run_id
        and runs.load_source = 'tmlbench'  -- an import's space is its source, never a folder

),

suites as (

    select * from {{ ref('int_suites') }}

),

counts as (

    select
        {{ setting_columns() }},
        {{ status_counts() }},
        count(*) filter (where status = 'harness_error' and not forgiven)::bigint
            as n_unforgiven_harness_error,
        count(*) filter (where status = 'provider_error' and not forgiven)::bigint
            as n_unforgiven_provider_error

    from runs
    group by {{ setting_columns() }}

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
        coalesce(n_unforgiven_harness_error >= harness_error_ceiling, false)
            as harness_error_ceiling_reached,
        provider_error_ceiling,
        coalesce(n_unforgiven_provider_error >= provider_error_ceiling, false)
            as provider_error_ceiling_reached

    from rates

)

select * from final
