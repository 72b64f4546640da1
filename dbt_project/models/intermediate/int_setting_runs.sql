-- The attempts that belong to a setting (agent, task, budget): every tmlbench run, and the
-- imported ones whose source recorded a budget. An imported run without one (the original
-- TML-bench's earliest databases have no budget column) stays in raw.runs and the run
-- explorer, but no setting can count it.
select * from {{ ref('stg_raw__runs') }}
where budget_seconds is not null
