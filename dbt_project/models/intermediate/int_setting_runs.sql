-- The attempts each suite counts, one row per (suite, run). A tmlbench run counts for a suite
-- when it lies in the suite's folder (raw.runs.run_space = the suite's runs_subdir) and its
-- setting (agent, task, budget) is one the suite file lists: the baseline runs of tml-v1's folder
-- count for tml-v1, tml-v1-llm and tml-v1-kilo alike, and an agent taken out of a suite leaves its
-- marts while its runs stay in raw.runs. Imported runs form one suite per source ('tml-bench'),
-- with every setting they have. An imported run without a budget (the original TML-bench's
-- earliest databases have no budget column) stays in raw.runs and the run explorer, but no
-- setting can count it.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}
    where budget_seconds is not null

),

suites as (

    select * from {{ ref('stg_raw__suites') }}

),

suite_settings as (

    select * from {{ ref('stg_raw__suite_settings') }}

),

suite_runs as (

    select
        suites.suite_id,
        runs.* exclude (recorded_suite_id)

    from runs
    inner join suites
        on runs.run_space = suites.runs_subdir
    -- the setting key spelled out: the run has no suite yet, its suite is the folder's
    inner join suite_settings
        on suites.suite_id = suite_settings.suite_id
        and runs.agent_id = suite_settings.agent_id
        and runs.task_id = suite_settings.task_id
        and runs.budget_seconds = suite_settings.budget_seconds
    where runs.load_source = 'tmlbench'

),

imported_runs as (

    select
        runs.load_source as suite_id,
        runs.* exclude (recorded_suite_id)

    from runs
    where runs.load_source <> 'tmlbench'

),

final as (

    select * from suite_runs
    union all by name
    select * from imported_runs

)

select * from final
