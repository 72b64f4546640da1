-- Per (suite, covered agent): the bootstrap's 95% interval of the primary (best_budget) score
-- and the probability of ranking first in the suite (var bootstrap_replicates replicates, var
-- bootstrap_seed). In a provisional suite (suite_status: some expected setting still lacks
-- successes) the replicates rank only the agents already complete, so P(rank 1) is among those;
-- provisional and unranked_agents (the suite's agents not ranked yet, which may place anywhere
-- once complete) say so on every row.
with

replicates as (

    select * from {{ ref('int_bootstrap_scores') }}

),

leaderboard as (

    select * from {{ ref('leaderboard') }}
    where variant = 'best_budget'

),

status as (

    select * from {{ ref('suite_status') }}

),

intervals as (

    select
        suite_id,
        agent_id,
        quantile_cont(score, 0.025) as score_low,
        quantile_cont(score, 0.975) as score_high,
        avg(case when rank = 1 then 1.0 else 0.0 end) as p_rank_1,
        count(*) as replicates

    from replicates
    group by suite_id, agent_id

),

final as (

    select
        leaderboard.suite_id,
        leaderboard.agent_id,
        leaderboard.score::double as score,
        intervals.score_low::double as score_low,
        intervals.score_high::double as score_high,
        intervals.p_rank_1::double as p_rank_1,
        intervals.replicates::bigint as replicates,
        status.provisional,
        (status.agents_expected - status.agents_ranked)::bigint as unranked_agents

    from leaderboard
    inner join intervals
        on leaderboard.suite_id = intervals.suite_id
        and leaderboard.agent_id = intervals.agent_id
    inner join status on leaderboard.suite_id = status.suite_id

)

select * from final
