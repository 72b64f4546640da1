-- What the dashboard's filters offer, one row per suite: the agents, tasks, budgets and statuses
-- of the attempts the suite counts (int_setting_runs), and the first and last day (UTC) one was
-- created. The suites themselves are this table's rows (`select suite_id from
-- display.filter_options order by suite_id`). A small table so that no page load scans the
-- attempts for them.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

-- the statuses that occur, in the taxonomy's order (macro run_statuses), not alphabetically
statuses as (

    select
        suite_id,
        list(
            status order by array_position(
                [{% for status in run_statuses() %}'{{ status }}'{{ ", " if not loop.last }}{% endfor %}],
                status
            )
        )::varchar[] as statuses

    from (select distinct suite_id, status from runs)
    group by suite_id

),

options as (

    select
        suite_id,
        list(distinct agent_id order by agent_id)::varchar[] as agents,
        list(distinct task_id order by task_id)::varchar[] as tasks,
        list(distinct budget_seconds order by budget_seconds)::integer[] as budgets,
        min(timezone('UTC', created_at))::date as first_day,
        max(timezone('UTC', created_at))::date as last_day

    from runs
    group by suite_id

),

final as (

    select
        options.suite_id,
        options.agents,
        options.tasks,
        options.budgets,
        statuses.statuses,
        options.first_day,
        options.last_day

    from options
    inner join statuses on options.suite_id = statuses.suite_id

)

select * from final
