-- The time-scaling page's grid, one row per (suite, ranked agent, task) curve: whether it is monotone
-- (its own median never gets worse: int_time_scaling_curves, whose rule marts.time_scaling_monotone
-- counts) and its points in budget order, formatted for the page.
with

curves as (

    select * from {{ ref('int_time_scaling_curves') }}

),

final as (

    select
        suite_id,
        agent_id,
        task_id,
        is_monotone,
        array_to_string(
            list_transform(points_by_budget, p -> printf('%.2f', p)), ' → '
        ) as points

    from curves

)

select * from final
