-- Agents that enter the leaderboard: at least N successes in every expected setting.
with

expected as (

    select * from {{ ref('int_settings_expected') }}

),

covered as (

    select agent_id
    from expected
    group by agent_id
    having max(missing) = 0

)

select * from covered
