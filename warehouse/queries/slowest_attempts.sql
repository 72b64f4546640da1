-- The 20 slowest attempts by wall-clock time, with how much of their budget they used.
-- Run: tmlbench sql -f warehouse/queries/slowest_attempts.sql
select
    run_id,
    agent_id,
    task_id,
    budget_seconds,
    status,
    round(wall_seconds, 1)                          as wall_seconds,
    round(wall_seconds / budget_seconds, 3)         as budget_used,
    round(cpu_seconds, 1)                           as cpu_seconds,
    round(peak_memory_bytes / 2 ^ 20)               as peak_memory_mib,
    limit_exceeded
from raw.runs
where wall_seconds is not null
order by wall_seconds desc, run_id
limit 20;
