-- The time-scaling page's monotone curves per agent: marts.time_scaling_monotone as the
-- dashboard reads it. The pages read display models only, so a mart can change shape without
-- breaking a page: this model's contract is the page's.
with

time_scaling_monotone as (

    select * from {{ ref('time_scaling_monotone') }}

),

final as (

    select
        suite_id,
        agent_id,
        curves,
        monotone_curves,
        share_monotone

    from time_scaling_monotone

)

select * from final
