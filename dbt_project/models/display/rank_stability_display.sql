-- The rank-stability page's mean task rank ± sd per ranked agent: marts.rank_stability as the
-- dashboard reads it. The pages read display models only, so a mart can change shape without
-- breaking a page: this model's contract is the page's.
with

rank_stability as (

    select * from {{ ref('rank_stability') }}

),

final as (

    select
        suite_id,
        agent_id,
        mean_rank,
        rank_std,
        n_tasks

    from rank_stability

)

select * from final
