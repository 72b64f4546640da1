-- Every expected setting: each agent seen in raw.runs × each (task, budget) cell seen in
-- raw.runs, its successes and how many it still lacks (missing). An agent is covered
-- (ranked) only when missing = 0 in all its rows.
with

expected as (

    select * from {{ ref('int_settings_expected') }}

),

covered as (

    select * from {{ ref('int_agents_covered') }}

),

final as (

    select
        expected.agent_id,
        expected.task_id,
        expected.budget_seconds,
        expected.attempts::bigint as attempts,
        expected.successes::bigint as successes,
        expected.missing::bigint as missing,
        expected.agent_id in (select agent_id from covered) as agent_is_covered

    from expected

)

select * from final
