-- Per setting (agent, task, budget): successes ÷ attempts and one count per status.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}

),

rates as (

    select
        agent_id,
        task_id,
        budget_seconds,
        {{ status_counts() }}

    from runs
    group by agent_id, task_id, budget_seconds

)

select * from rates
