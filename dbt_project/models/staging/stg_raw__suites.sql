with

source as (

    select * from {{ source('raw', 'suites') }}

),

renamed as (

    select
        suite_id,
        title as suite_title,
        attempts::integer as attempts,
        attempt_ceiling::integer as attempt_ceiling,
        harness_error_ceiling::integer as harness_error_ceiling,
        provider_error_ceiling::integer as provider_error_ceiling,
        coalesce(runs_subdir, '.') as runs_subdir,
        spec_sha256,
        loaded_at

    from source

)

select * from renamed
