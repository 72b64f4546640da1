-- Every setting a suite expects: each agent seen in the suite's runs × each (task, budget) cell
-- seen in the suite's runs, with how many successes it has and how many the rules still lack.
-- Another suite's agents and cells are never expected here.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

agents as (

    select distinct suite_id, agent_id from runs

),

cells as (

    select distinct suite_id, task_id, budget_seconds from runs

),

setting_successes as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        count(*) as attempts,
        count(*) filter (where status = 'success') as successes

    from runs
    group by suite_id, agent_id, task_id, budget_seconds

),

expected as (

    select
        agents.suite_id,
        agents.agent_id,
        cells.task_id,
        cells.budget_seconds,
        coalesce(setting_successes.attempts, 0) as attempts,
        coalesce(setting_successes.successes, 0) as successes

    from agents
    inner join cells
        on agents.suite_id = cells.suite_id
    left join setting_successes
        on agents.suite_id = setting_successes.suite_id
        and agents.agent_id = setting_successes.agent_id
        and cells.task_id = setting_successes.task_id
        and cells.budget_seconds = setting_successes.budget_seconds

),

final as (

    select
        *,
        greatest({{ var('counted_successes') }} - successes, 0) as missing

    from expected

)

select * from final
