-- The primary leaderboard of each suite (best budget per task, mean over tasks), built by dbt.
-- Needs `dbt build` to have run (schema marts). Run: tmlbench sql -f warehouse/queries/leaderboard.sql
-- One suite: add `and leaderboard.suite_id = 'tml-v1'` (each suite's ranks are its own).
-- A suite with settings still lacking successes is provisional (marts.suite_status): its agents
-- are ranked among those complete so far.
select
    leaderboard.suite_id,
    leaderboard.rank,
    leaderboard.agent_id,
    round(leaderboard.score, 4) as score,
    case when status.provisional then 'provisional: ' else 'final: ' end
        || status.settings_complete || ' of ' || status.settings_expected || ' settings'
        as suite_status
from marts.leaderboard
inner join marts.suite_status as status on leaderboard.suite_id = status.suite_id
where leaderboard.variant = 'best_budget'
order by leaderboard.suite_id, leaderboard.rank, leaderboard.agent_id;
