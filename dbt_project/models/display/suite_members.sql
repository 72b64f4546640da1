-- Which agents and tasks each suite counts runs of (int_setting_runs: the suite a run counts
-- for). Every mart is keyed by suite, so the dashboard selects a suite's rows with
-- `where suite_id = ?`; this small table lists a suite's agents and tasks without scanning the
-- attempts.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

final as (

    select distinct suite_id, agent_id, task_id
    from runs

)

select * from final
