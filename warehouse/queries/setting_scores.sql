-- Setting scores as the benchmark counts them: median of the first 5 successes per
-- (agent, task, budget), with the interquartile range. Built by dbt (schema marts).
-- Run: tmlbench sql -f warehouse/queries/setting_scores.sql
select
    suite_id,
    task_id,
    budget_seconds,
    agent_id,
    median_score,
    q1,
    q3,
    iqr,
    n_counted,
    successes,
    attempts
from marts.setting_scores
order by suite_id, task_id, budget_seconds, median_score desc nulls last, agent_id;
