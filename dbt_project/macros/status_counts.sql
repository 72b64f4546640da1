{#- The success-rate columns shared by every grain (agent, setting): attempts, agent_attempts,
    successes, success_rate and one n_<status> count per status (macro run_statuses). Use inside
    a grouped select. Faults that are not the agent's are never blamed on it: harness_error
    (the harness's) and provider_error (the model provider's: unrecovered 429s, 5xx, in-stream
    errors or cut streams seen by the gateway) attempts are counted (attempts, n_harness_error,
    n_provider_error) but are not the agent's attempts, so they are not in the rate's
    denominator; the rate is null while the agent has no attempt of its own. -#}
{% macro not_the_agents_statuses() -%}
    {{ return(['harness_error', 'provider_error']) }}
{%- endmacro %}

{#- Whether an attempt is the agent's own (every status but not_the_agents_statuses): what the
    success rate counts, and what every per-attempt reliability mart (setting_pass_k) counts. -#}
{% macro agents_own_attempt(status='status') -%}
    {{ status }} not in ('{{ not_the_agents_statuses() | join("', '") }}')
{%- endmacro %}

{% macro status_counts() -%}
        {%- set own = agents_own_attempt() %}
        count(*)::bigint as attempts,
        count(*) filter (where {{ own }})::bigint as agent_attempts,
        count(*) filter (where status = 'success')::bigint as successes,
        (count(*) filter (where status = 'success')
            / nullif(count(*) filter (where {{ own }}), 0))::double as success_rate,
        {%- for status in run_statuses() %}
        count(*) filter (where status = '{{ status }}')::bigint as n_{{ status }}{{ "," if not loop.last }}
        {%- endfor %}
{%- endmacro %}
