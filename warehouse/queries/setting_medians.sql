-- Runs per setting (agent, task, budget) with the median raw score over ALL successes.
-- The benchmark's own setting score counts only the first 5 successes: see setting_scores.sql
-- (marts.setting_scores). This query is the raw view, handy before dbt has run: per run space
-- (the folder a suite's runs_subdir names), which is not yet per suite (marts.suite_runs).
-- Run: tmlbench sql -f warehouse/queries/setting_medians.sql
select
    run_space,
    agent_id,
    task_id,
    budget_seconds,
    any_value(metric_name)                              as metric_name,
    count(*)                                            as attempts,
    count(*) filter (where status = 'success')          as successes,
    median(score) filter (where status = 'success')     as median_score,
    min(created_at)                                     as first_attempt,
    max(created_at)                                     as last_attempt
from raw.runs
group by run_space, agent_id, task_id, budget_seconds
order by run_space, task_id, budget_seconds, agent_id;
