-- One row per (suite, counted attempt): the first N successes of each setting (suite, agent,
-- task, budget) by created_at, then run_id — the attempts behind every setting score — with the
-- attempt's tokens and cost. A run shared by two suites is counted in each (its success_index
-- may differ). The dashboard's snapshot carries only the marts and raw schemas, so the
-- per-attempt plots and the cost marts read the counted attempts from here.
with

counted as (

    select * from {{ ref('int_runs_counted') }}

),

runs as (

    select * from {{ ref('int_setting_runs') }}

),

final as (

    select
        counted.suite_id,
        counted.run_id,
        counted.agent_id,
        counted.task_id,
        counted.budget_seconds,
        counted.created_at,
        counted.success_index::bigint as success_index,
        counted.score::double as score,
        counted.score_hib::double as score_hib,
        runs.tokens_in::bigint as tokens_in,
        runs.tokens_out::bigint as tokens_out,
        runs.cost_usd::double as cost_usd

    from counted
    inner join runs
        on counted.suite_id = runs.suite_id
        and counted.run_id = runs.run_id

)

select * from final
