-- The reliability page's stacked bar: marts.success_rates in long form, one row per
-- (suite, agent, status of the taxonomy), with how many attempts ended so.
with

rates as (

    select * from {{ ref('success_rates') }}

),

final as (

    {% for status in run_statuses() %}
    select suite_id, agent_id, '{{ status }}' as status, n_{{ status }}::bigint as attempts
    from rates
    {% if not loop.last %}union all{% endif %}
    {% endfor %}

)

select * from final
