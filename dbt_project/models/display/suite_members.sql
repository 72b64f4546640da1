-- Which agents and tasks ran in each suite: on the marts (aggregates over all attempts) the
-- dashboard's suite filter keeps the agents and tasks that ran in the chosen suites.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}

),

final as (

    select distinct suite_id, agent_id, task_id
    from runs
    where suite_id is not null

)

select * from final
