-- Points per ranked setting: within each (task, budget) cell, the higher-is-better medians
-- of the covered agents min-max scaled (best 1, worst 0, all equal 0.5).
with

settings as (

    select * from {{ ref('setting_scores') }}
    where agent_id in (select agent_id from {{ ref('int_agents_covered') }})

),

normalized as (

    select
        agent_id,
        task_id,
        budget_seconds,
        median_score_hib,
        ({{ min_max_points('median_score_hib', 'task_id, budget_seconds') }})::double as points

    from settings

)

select * from normalized
