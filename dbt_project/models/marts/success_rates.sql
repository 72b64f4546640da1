-- Per agent, over all its attempts (every setting, every attempt): successes ÷ attempts
-- and one count per status.
with

runs as (

    select * from {{ ref('stg_raw__runs') }}

),

rates as (

    select
        agent_id,
        count(*)::bigint as attempts,
        count(*) filter (where status = 'success')::bigint as successes,
        (count(*) filter (where status = 'success') / count(*))::double as success_rate,
        {%- for status in run_statuses() %}
        count(*) filter (where status = '{{ status }}')::bigint as n_{{ status }}{{ "," if not loop.last }}
        {%- endfor %}

    from runs
    group by agent_id

)

select * from rates
