-- Which runs each suite counts, one row per (suite, run): the membership of int_setting_runs
-- (a run in the suite's folder, of a setting its file lists; an import's runs for its source),
-- published so the dashboard's run explorer and SQL users can select raw.runs by suite.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

final as (

    select
        suite_id,
        run_space,
        run_id,
        agent_id,
        task_id,
        budget_seconds

    from runs

)

select * from final
