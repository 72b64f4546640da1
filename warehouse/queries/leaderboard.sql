-- The primary leaderboard of each suite (best budget per task, mean over tasks), built by dbt.
-- Needs `dbt build` to have run (schema marts). Run: tmlbench sql -f warehouse/queries/leaderboard.sql
-- One suite: add `and suite_id = 'tml-v1'` (each suite's ranks are its own).
select
    suite_id,
    rank,
    agent_id,
    round(score, 4) as score
from marts.leaderboard
where variant = 'best_budget'
order by suite_id, rank, agent_id;
