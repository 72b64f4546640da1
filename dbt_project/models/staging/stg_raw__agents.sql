with

source as (

    select * from {{ source('raw', 'agents') }}

),

renamed as (

    select
        agent_id,
        kind as agent_kind,
        title as agent_title,
        harness,
        harness_version,
        provider,
        model_id,
        knowledge_cutoff,
        price_in_per_mtok_usd,
        price_out_per_mtok_usd,
        source as load_source,
        loaded_at

    from source

)

select * from renamed
