with

source as (

    select * from {{ source('raw', 'tasks') }}

),

renamed as (

    select
        task_id,
        title as task_title,
        task_type,
        metric_name,
        metric_direction,
        id_column,
        target_column,
        start_date as task_start_date,
        kaggle_competition,
        loaded_at

    from source

)

select * from renamed
