-- The attempts each suite counts, one row per (suite, run): every tmlbench run, and the
-- imported ones whose source recorded a budget. An imported run without one (the original
-- TML-bench's earliest databases have no budget column) stays in raw.runs and the run
-- explorer, but no setting can count it.
-- INTERIM: a run counts for the suite its record names (imported runs: their source). The
-- membership by suite file (runs_subdir and settings) replaces this.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}
    where budget_seconds is not null

),

final as (

    select
        coalesce(suite_id, load_source) as suite_id,
        * exclude (suite_id)

    from runs

)

select * from final
