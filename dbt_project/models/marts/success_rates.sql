-- Per agent, over all its attempts (every setting, every attempt): successes ÷ attempts
-- and one count per status.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

rates as (

    select
        agent_id,
        {{ status_counts() }}

    from runs
    group by agent_id

)

select * from rates
