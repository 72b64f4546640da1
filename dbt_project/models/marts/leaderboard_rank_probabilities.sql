-- Per covered agent and every possible rank 1..(number of covered agents): the share of
-- bootstrap replicates in which the agent got that rank (0 when it never did).
with

replicates as (

    select * from {{ ref('int_bootstrap_scores') }}

),

agents as (

    select distinct agent_id from replicates

),

n_replicates as (

    select count(distinct replicate) as replicates from replicates

),

possible_ranks as (

    select agents.agent_id, r.range::bigint as rank
    from agents
    cross join range(1, (select count(*) from agents) + 1) as r

),

rank_counts as (

    select agent_id, rank, count(*) as n_replicates
    from replicates
    group by agent_id, rank

),

final as (

    select
        possible_ranks.agent_id,
        possible_ranks.rank,
        (coalesce(rank_counts.n_replicates, 0) / n_replicates.replicates)::double as probability

    from possible_ranks
    cross join n_replicates
    left join rank_counts
        on possible_ranks.agent_id = rank_counts.agent_id
        and possible_ranks.rank = rank_counts.rank

)

select * from final
