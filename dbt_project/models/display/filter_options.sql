-- What the dashboard's filters offer, in one row: the suites (those that count an attempt),
-- the agents, tasks, budgets and statuses seen in the attempts, and the first and last day (UTC)
-- an attempt was created. A small table so that no page load scans the attempts for them.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}

),

suites as (

    select coalesce(list(distinct suite_id order by suite_id), [])::varchar[] as suites
    from {{ ref('int_setting_runs') }}

),

-- the statuses that occur, in the taxonomy's order (macro run_statuses), not alphabetically
statuses as (

    select
        coalesce(
            list(
                status order by array_position(
                    [{% for status in run_statuses() %}'{{ status }}'{{ ", " if not loop.last }}{% endfor %}],
                    status
                )
            ),
            []
        )::varchar[] as statuses

    from (select distinct status from runs)

),

final as (

    select
        (select suites from suites) as suites,
        coalesce(list(distinct agent_id order by agent_id), [])::varchar[] as agents,
        coalesce(list(distinct task_id order by task_id), [])::varchar[] as tasks,
        coalesce(
            list(distinct budget_seconds order by budget_seconds)
                filter (where budget_seconds is not null),
            []
        )::integer[] as budgets,
        (select statuses from statuses) as statuses,
        min(timezone('UTC', created_at))::date as first_day,
        max(timezone('UTC', created_at))::date as last_day

    from runs

)

select * from final
