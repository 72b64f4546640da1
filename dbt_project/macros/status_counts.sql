{#- The success-rate columns shared by every grain (agent, setting): attempts, agent_attempts,
    successes, success_rate and one n_<status> count per status (macro run_statuses). Use inside
    a grouped select. A harness fault is never blamed on the agent: harness_error attempts are
    counted (attempts, n_harness_error) but are not the agent's attempts, so they are not in the
    rate's denominator; the rate is null while the agent has no attempt of its own. -#}
{% macro status_counts() -%}
        count(*)::bigint as attempts,
        count(*) filter (where status != 'harness_error')::bigint as agent_attempts,
        count(*) filter (where status = 'success')::bigint as successes,
        (count(*) filter (where status = 'success')
            / nullif(count(*) filter (where status != 'harness_error'), 0))::double as success_rate,
        {%- for status in run_statuses() %}
        count(*) filter (where status = '{{ status }}')::bigint as n_{{ status }}{{ "," if not loop.last }}
        {%- endfor %}
{%- endmacro %}
