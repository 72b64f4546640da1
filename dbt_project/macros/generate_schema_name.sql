{#- A model's custom schema is used as is (marts.<name>, not main_marts.<name>): the
    warehouse's public SQL interface promises schema `marts`. Models without one use the
    target schema. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
