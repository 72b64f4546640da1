-- Every setting a suite expects, with how many successes it has and how many its suite's N still
-- lacks (missing). A suite with a file expects exactly the settings its file lists
-- (raw.suite_settings), run or not, so a suite run part-way shows what it still lacks. An
-- imported suite has no file: it expects each agent seen in its runs × each (task, budget) cell
-- seen in its runs (the pandas reference's rule). Another suite's settings are never expected.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

suites as (

    select * from {{ ref('int_suites') }}

),

listed as (

    select {{ setting_columns('suite_settings') }}
    from {{ ref('stg_raw__suite_settings') }} as suite_settings
    inner join suites
        on suite_settings.suite_id = suites.suite_id
    where suites.from_suite_file

),

imported_runs as (

    select runs.*
    from runs
    inner join suites
        on runs.suite_id = suites.suite_id
    where not suites.from_suite_file

),

agents_seen as (

    select distinct suite_id, agent_id from imported_runs

),

cells_seen as (

    select distinct {{ cell_columns() }} from imported_runs

),

seen as (

    select agents_seen.suite_id, agents_seen.agent_id, cells_seen.task_id,
        cells_seen.budget_seconds
    from agents_seen
    inner join cells_seen
        on agents_seen.suite_id = cells_seen.suite_id

),

settings as (

    select * from listed
    union all
    select * from seen

),

setting_successes as (

    select
        {{ setting_columns() }},
        count(*) as attempts,
        count(*) filter (where status = 'success') as successes

    from runs
    group by {{ setting_columns() }}

),

expected as (

    select
        {{ setting_columns('settings') }},
        coalesce(setting_successes.attempts, 0) as attempts,
        coalesce(setting_successes.successes, 0) as successes,
        suites.counted_successes

    from settings
    inner join suites
        on settings.suite_id = suites.suite_id
    left join setting_successes on {{ same_setting('settings', 'setting_successes') }}

),

final as (

    select
        *,
        greatest(counted_successes - successes, 0) as missing

    from expected

)

select * from final
