-- Attempts per status per agent (all tasks, budgets and sources), most attempts first.
-- Run: tmlbench sql -f warehouse/queries/attempts_by_status.sql
select
    agent_id,
    count(*)                                                 as attempts,
    count(*) filter (where status = 'success')               as success,
    count(*) filter (where status = 'invalid_submission')    as invalid_submission,
    count(*) filter (where status = 'no_submission')         as no_submission,
    count(*) filter (where status = 'timeout')               as timeout,
    count(*) filter (where status = 'runtime_error')         as runtime_error,
    count(*) filter (where status = 'provider_error')        as provider_error,
    count(*) filter (where status = 'harness_error')         as harness_error,
    round(count(*) filter (where status = 'success') / count(*), 3) as success_rate
from raw.runs
group by agent_id
order by attempts desc, agent_id;
