-- Per suite, every (agent, task) pair of its runs whose agent and task specs are loaded
-- (raw.agents, raw.tasks): contaminated when the agent's model knowledge cutoff is on or after
-- the task's start date; null when either date is unknown.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

agents as (

    select * from {{ ref('stg_raw__agents') }}

),

tasks as (

    select * from {{ ref('stg_raw__tasks') }}

),

suite_agents as (

    select distinct suite_id, agent_id from runs

),

suite_tasks as (

    select distinct suite_id, task_id from runs

),

flags as (

    select
        suite_agents.suite_id,
        agents.agent_id,
        tasks.task_id,
        agents.knowledge_cutoff,
        tasks.task_start_date,
        (agents.knowledge_cutoff >= tasks.task_start_date) as contaminated

    from suite_agents
    inner join suite_tasks on suite_agents.suite_id = suite_tasks.suite_id
    inner join agents on suite_agents.agent_id = agents.agent_id
    inner join tasks on suite_tasks.task_id = tasks.task_id

)

select * from flags
