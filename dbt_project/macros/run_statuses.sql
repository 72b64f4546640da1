{#- The status taxonomy (ARCHITECTURE.md): exactly one per attempt. Keep in step with
    runner.records.Status and the accepted_values tests in the YAML. -#}
{% macro run_statuses() -%}
    {{ return(['success', 'invalid_submission', 'no_submission', 'timeout',
               'runtime_error', 'provider_error', 'harness_error']) }}
{%- endmacro %}
