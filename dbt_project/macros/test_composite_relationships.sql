{#- Referential integrity on a composite key: every row of the model whose key columns are all
    set has a row with the same values of the same columns in `to`. dbt's relationships test
    takes one column; the marts' settings are keyed by agent_id, task_id and budget_seconds. -#}
{% test composite_relationships(model, to, columns) %}
select {% for column in columns %}child.{{ column }}{{ ", " if not loop.last }}{% endfor %}
from {{ model }} as child
where {% for column in columns %}child.{{ column }} is not null and {% endfor %}not exists (
    select 1
    from {{ to }} as parent
    where {% for column in columns -%}
        parent.{{ column }} = child.{{ column }}{{ " and " if not loop.last }}
    {%- endfor %}
)
{% endtest %}
