-- One row per suite the marts compute, with the rules each applies: N (counted_successes), the
-- successes a setting's score counts, and the per-setting fault ceilings. A suite with a file
-- (raw.suites) takes its file's `attempts` as N, so the runner (which schedules a setting until
-- it has `attempts` successes) and the marts agree on one number. Imported suites (one per
-- source, e.g. 'tml-bench') have no file: they keep the paper's N (var counted_successes) and no
-- ceilings (their runner's are unknown). A view: a rule raised in a suite file (reloaded into
-- raw.suites) reaches any partial build of the marts that read it.
{{ config(materialized='view') }}
with

suites as (

    select * from {{ ref('stg_raw__suites') }}

),

imported as (

    select distinct suite_id
    from {{ ref('int_setting_runs') }}
    where load_source <> 'tmlbench'

),

final as (

    select
        suite_id,
        true as from_suite_file,
        attempts as counted_successes,
        harness_error_ceiling,
        provider_error_ceiling

    from suites

    union all

    select
        suite_id,
        false as from_suite_file,
        {{ var('counted_successes') }}::integer as counted_successes,
        null::integer as harness_error_ceiling,
        null::integer as provider_error_ceiling

    from imported

)

select * from final
