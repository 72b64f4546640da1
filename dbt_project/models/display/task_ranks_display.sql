-- The rank-stability page's task × agent rank heatmap: marts.task_ranks as the dashboard reads
-- it. The pages read display models only, so a mart can change shape without breaking a page:
-- this model's contract is the page's.
with

task_ranks as (

    select * from {{ ref('task_ranks') }}

),

final as (

    select
        suite_id,
        agent_id,
        task_id,
        best_points,
        rank

    from task_ranks

)

select * from final
