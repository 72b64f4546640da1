-- The primary leaderboard (best budget per task, mean over tasks), built by dbt.
-- Needs `dbt build` to have run (schema marts). Run: tmlbench sql -f warehouse/queries/leaderboard.sql
select
    rank,
    agent_id,
    round(score, 4) as score
from marts.leaderboard
where variant = 'best_budget'
order by rank, agent_id;
