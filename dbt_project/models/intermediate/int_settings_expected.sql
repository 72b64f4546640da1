-- Every setting the suite expects: each agent seen in the runs × each (task, budget) cell
-- seen in the runs, with how many successes it has and how many the rules still lack.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

agents as (

    select distinct agent_id from runs

),

cells as (

    select distinct task_id, budget_seconds from runs

),

setting_successes as (

    select
        agent_id,
        task_id,
        budget_seconds,
        count(*) as attempts,
        count(*) filter (where status = 'success') as successes

    from runs
    group by agent_id, task_id, budget_seconds

),

expected as (

    select
        agents.agent_id,
        cells.task_id,
        cells.budget_seconds,
        coalesce(setting_successes.attempts, 0) as attempts,
        coalesce(setting_successes.successes, 0) as successes

    from agents
    cross join cells
    left join setting_successes
        on agents.agent_id = setting_successes.agent_id
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
