{#- The keys the models group, partition and join by, declared once. A model names the key it
    means (`group by {{ setting_columns() }}`, `on {{ same_setting('a', 'b') }}`) instead of
    spelling its columns, so every setting is the same four columns in the same order and no join
    can forget one (a join on three of them would silently mix two budgets). The compiled SQL is
    the plain column list and equality: DuckDB plans it as before. -#}

{#- A setting: one agent's attempts at one task under one time budget, within one suite (the
    grain of setting_scores, setting_success_rates, coverage, setting_costs, ...). The runner's
    setting key (runner.suites.benchmark_settings.setting_key, 'agent/task/budget') names one within a suite; the
    bootstrap hashes that one (macros/bootstrap_hash.sql), so its draws ignore the suite. -#}
{% macro setting_key() -%}
    {{ return(['suite_id', 'agent_id', 'task_id', 'budget_seconds']) }}
{%- endmacro %}

{#- A cell: one task under one time budget, within one suite; the agents of a cell are
    normalized against one another and share its trivial score (int_cell_trivial_scores). -#}
{% macro cell_key() -%}
    {{ return(['suite_id', 'task_id', 'budget_seconds']) }}
{%- endmacro %}

{#- The key's columns, comma-separated, each qualified by `relation` when given: for a select
    list, a group by or a window's partition by. -#}
{% macro key_columns(key, relation=none) -%}
    {%- set prefix = relation ~ '.' if relation is not none else '' -%}
    {%- for column in key %}{{ prefix ~ column }}{{ ', ' if not loop.last }}{% endfor -%}
{%- endmacro %}

{#- A join condition: `left` and `right` have the same value in every column of the key. -#}
{% macro same_key(key, left, right) -%}
    {%- for column in key -%}
        {{ left }}.{{ column }} = {{ right }}.{{ column }}{{ ' and ' if not loop.last }}
    {%- endfor -%}
{%- endmacro %}

{% macro setting_columns(relation=none) -%}
    {{ key_columns(setting_key(), relation) }}
{%- endmacro %}

{% macro same_setting(left, right) -%}
    {{ same_key(setting_key(), left, right) }}
{%- endmacro %}

{% macro cell_columns(relation=none) -%}
    {{ key_columns(cell_key(), relation) }}
{%- endmacro %}

{% macro same_cell(left, right) -%}
    {{ same_key(cell_key(), left, right) }}
{%- endmacro %}
