with

source as (

    select * from {{ source('raw', 'resumptions') }}

),

renamed as (

    select
        -- the forgiven fault: a run is (run_space, run_id), as in stg_raw__runs
        run_space,
        run_id,
        suite_id,
        setting,
        resumed_at,
        resumed_by,
        source_path,
        line_number

    from source

)

select * from renamed
