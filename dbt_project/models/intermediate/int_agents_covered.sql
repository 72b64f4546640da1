-- Agents that enter a suite's leaderboard: at least N successes in every setting the suite
-- expects. One row per (suite, agent): an agent covered in one suite may lack runs in another.
with

expected as (

    select * from {{ ref('int_settings_expected') }}

),

covered as (

    select suite_id, agent_id
    from expected
    group by suite_id, agent_id
    having max(missing) = 0

)

select * from covered
