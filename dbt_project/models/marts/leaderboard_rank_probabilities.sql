-- Per (suite, covered agent) and every possible rank 1..(number of the suite's covered agents):
-- the share of the suite's bootstrap replicates in which the agent got that rank (0 when it
-- never did). In a provisional suite (suite_status) the ranks are among the agents already
-- complete: provisional and unranked_agents (which may still place anywhere) say so on each row.
with

replicates as (

    select * from {{ ref('int_bootstrap_scores') }}

),

agents as (

    select distinct suite_id, agent_id from replicates

),

suites as (

    select
        suite_id,
        count(distinct agent_id) as n_agents,
        count(distinct replicate) as replicates

    from replicates
    group by suite_id

),

possible_ranks as (

    select
        agents.suite_id,
        agents.agent_id,
        unnest(range(1, suites.n_agents + 1))::bigint as rank

    from agents
    inner join suites on agents.suite_id = suites.suite_id

),

status as (

    select * from {{ ref('suite_status') }}

),

rank_counts as (

    select suite_id, agent_id, rank, count(*) as n_replicates
    from replicates
    group by suite_id, agent_id, rank

),

final as (

    select
        possible_ranks.suite_id,
        possible_ranks.agent_id,
        possible_ranks.rank,
        (coalesce(rank_counts.n_replicates, 0) / suites.replicates)::double as probability,
        status.provisional,
        (status.agents_expected - status.agents_ranked)::bigint as unranked_agents

    from possible_ranks
    inner join suites on possible_ranks.suite_id = suites.suite_id
    inner join status on possible_ranks.suite_id = status.suite_id
    left join rank_counts
        on possible_ranks.suite_id = rank_counts.suite_id
        and possible_ranks.agent_id = rank_counts.agent_id
        and possible_ranks.rank = rank_counts.rank

)

select * from final
