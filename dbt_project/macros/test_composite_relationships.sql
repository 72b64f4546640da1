{#- Referential integrity on a composite key: every row of the model whose key columns are all
    set has a row with the same values of the same columns in `to`. dbt's relationships test
    takes one column; the marts' settings are keyed by agent_id, task_id and budget_seconds.

    Tagged cross_mart: it compares two models the same build made from the same runs, so it
    guards the models' SQL rather than the data, and the test suite's many small builds skip it
    (build_marts(..., exclude=warehouse.marts.CROSS_MART_TESTS): --exclude tag:cross_mart);
    every other build runs it (make run, the Dagster asset checks, `tmlbench warehouse build`,
    the golden and cross-check tests). -#}
{% test composite_relationships(model, to, columns) %}
{{ config(tags=['cross_mart']) }}
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
