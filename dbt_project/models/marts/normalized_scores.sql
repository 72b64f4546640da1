-- Points per ranked setting: within each suite's (task, budget) cell, the higher-is-better
-- medians of the suite's covered agents min-max scaled (best 1, worst 0, all equal 0.5).
with

covered as (

    select * from {{ ref('int_agents_covered') }}

),

settings as (

    select setting_scores.*
    from {{ ref('setting_scores') }} as setting_scores
    inner join covered
        on setting_scores.suite_id = covered.suite_id
        and setting_scores.agent_id = covered.agent_id

),

normalized as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds,
        median_score_hib,
        ({{ min_max_points('median_score_hib', 'suite_id, task_id, budget_seconds') }})::double as points

    from settings

)

select * from normalized
