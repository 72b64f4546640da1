-- The reliability page's stacked bar: marts.success_rates in long form, one row per
-- (suite, agent, status of the taxonomy), with how many attempts ended so and whose outcome
-- the status is: the agent's (success and its own failures), or a fault of the harness or of
-- the model provider, which is not the agent's (kept out of its success rate, re-run).
with

rates as (

    select * from {{ ref('success_rates') }}

),

final as (

    {% for status in run_statuses() %}
    select
        suite_id,
        agent_id,
        '{{ status }}' as status,
        n_{{ status }}::bigint as attempts,
        '{{ {"harness_error": "harness", "provider_error": "provider"}.get(status, "agent") }}'
            as attributed_to
    from rates
    {% if not loop.last %}union all{% endif %}
    {% endfor %}

)

select * from final
