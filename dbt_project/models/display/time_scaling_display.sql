-- The time-scaling page's mean normalized points per budget: marts.time_scaling as the
-- dashboard reads it. The pages read display models only, so a mart can change shape without
-- breaking a page: this model's contract is the page's.
with

time_scaling as (

    select * from {{ ref('time_scaling') }}

),

final as (

    select
        suite_id,
        agent_id,
        budget_seconds,
        mean_points,
        n_tasks

    from time_scaling

)

select * from final
