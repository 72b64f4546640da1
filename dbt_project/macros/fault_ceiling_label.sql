{#- How a setting's faults of one kind (harness_error, provider_error) read against its ceiling:
    `n of <ceiling>`, n the faults the ceiling counts (those no resumption forgave); `⊘ n of
    <ceiling>: stopped at the ceiling` when the setting stopped there; just the faults when the
    ceiling is unknown; `(k forgiven)` after it when resumptions forgave k faults. Reads the
    columns n_<kind>, n_unforgiven_<kind>, <kind>_ceiling and stopped_at_<kind>_ceiling. -#}
{% macro fault_ceiling_label(kind) -%}
        case
            when stopped_at_{{ kind }}_ceiling
                then '⊘ ' || n_unforgiven_{{ kind }} || ' of ' || {{ kind }}_ceiling
                    || ': stopped at the ceiling'
            when {{ kind }}_ceiling is null then n_{{ kind }}::varchar
            else n_unforgiven_{{ kind }} || ' of ' || {{ kind }}_ceiling
        end
        || case
            when n_{{ kind }} > n_unforgiven_{{ kind }}
                then ' (' || (n_{{ kind }} - n_unforgiven_{{ kind }}) || ' forgiven)'
            else ''
        end
{%- endmacro %}
