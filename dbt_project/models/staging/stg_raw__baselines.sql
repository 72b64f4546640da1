-- Reference scores imported from the original TML-bench (per competition and baseline type).
with

source as (

    select * from {{ source('raw', 'baselines') }}

)

select
    source as load_source,
    task_id,
    baseline_type,
    metric_name,
    score,
    score_normalized,
    local_validation_score,
    submission_sha256,
    submission_normalized_sha256,
    task_spec_sha256,
    public_manifest_sha256,
    source_fields,
    created_at,
    loaded_at

from source
