{#- The closed vocabularies of the record and the marts, declared once for dbt: models loop
    over them and the YAML's accepted_values tests take them (values: "{{ run_statuses() }}").
    Python declares the same words as types (runner.attempts.records.Status, runner.tasks.vocabulary.Direction);
    warehouse/ddl/raw.sql checks them in raw.runs. tests/test_status_list.py keeps every copy
    in step. -#}

{#- The status taxonomy (ARCHITECTURE.md): exactly one per attempt. -#}
{% macro run_statuses() -%}
    {{ return(['success', 'invalid_submission', 'no_submission', 'timeout',
               'runtime_error', 'provider_error', 'harness_error']) }}
{%- endmacro %}

{#- A task metric's direction: score_hib is the score for maximize, -score for minimize. -#}
{% macro metric_directions() -%}
    {{ return(['maximize', 'minimize']) }}
{%- endmacro %}

{#- The leaderboard's score variants; best_budget is the primary score. -#}
{% macro leaderboard_variants() -%}
    {{ return(['best_budget', 'all_cells', 'largest_budget']) }}
{%- endmacro %}
