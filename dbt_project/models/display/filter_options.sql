-- What the dashboard's suite picker and filters offer, one row per suite the marts know
-- (int_suites: every loaded suite file, runs or not, and every imported source): its title, whether
-- it counts any attempt yet, the agents, tasks, budgets and statuses of the attempts it counts
-- (int_setting_runs; empty lists without any), and the first and last day (UTC) one was created.
-- The suites themselves are this table's rows (`select suite_id from display.filter_options order
-- by suite_id`): a suite file without runs is listed too, so the dashboard can say how to run it.
-- A small table so that no page load scans the attempts for them.
with

suites as (

    select * from {{ ref('int_suites') }}

),

suite_files as (

    select * from {{ ref('stg_raw__suites') }}

),

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
        suites.suite_id,
        suite_files.suite_title,
        suites.from_suite_file,
        options.suite_id is not null as has_runs,
        coalesce(options.agents, []::varchar[]) as agents,
        coalesce(options.tasks, []::varchar[]) as tasks,
        coalesce(options.budgets, []::integer[]) as budgets,
        coalesce(statuses.statuses, []::varchar[]) as statuses,
        options.first_day,
        options.last_day

    from suites
    left join suite_files on suites.suite_id = suite_files.suite_id
    left join options on suites.suite_id = options.suite_id
    left join statuses on suites.suite_id = statuses.suite_id

)

select * from final
