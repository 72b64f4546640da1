-- Invalid submissions with the grader's reason, newest first.
-- Run: tmlbench sql -f warehouse/queries/invalid_submissions.sql
select
    created_at,
    run_id,
    agent_id,
    task_id,
    budget_seconds,
    coalesce(validation_code, '(no code)')  as validation_code,
    validation_message,
    submission_path
from raw.runs
where status = 'invalid_submission'
order by created_at desc, run_id;
