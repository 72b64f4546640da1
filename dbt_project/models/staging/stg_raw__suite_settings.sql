with

source as (

    select * from {{ source('raw', 'suite_settings') }}

),

renamed as (

    select
        suite_id,
        agent_id,
        task_id,
        budget_seconds::integer as budget_seconds

    from source

)

select * from renamed
