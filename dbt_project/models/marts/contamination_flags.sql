-- Every (agent, task) pair of raw.agents × raw.tasks: contaminated when the agent's model
-- knowledge cutoff is on or after the task's start date; null when either date is unknown.
with

agents as (

    select * from {{ ref('stg_raw__agents') }}

),

tasks as (

    select * from {{ ref('stg_raw__tasks') }}

),

flags as (

    select
        agents.agent_id,
        tasks.task_id,
        agents.knowledge_cutoff,
        tasks.task_start_date,
        (agents.knowledge_cutoff >= tasks.task_start_date) as contaminated

    from agents
    cross join tasks

)

select * from flags
