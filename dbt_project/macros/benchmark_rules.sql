{#- Shared pieces of the benchmark's arithmetic, used by the point estimates and the bootstrap. -#}

{#- Min-max scaling within a partition: best 1, worst 0, all equal 0.5. -#}
{% macro min_max_points(value, partition_by) -%}
    case
        when max({{ value }}) over (partition by {{ partition_by }})
            > min({{ value }}) over (partition by {{ partition_by }})
        then ({{ value }} - min({{ value }}) over (partition by {{ partition_by }}))
            / (max({{ value }}) over (partition by {{ partition_by }})
               - min({{ value }}) over (partition by {{ partition_by }}))
        else 0.5
    end
{%- endmacro %}

{#- "min" ranking, 1 = highest score, ties share the lowest rank. Scores are rounded first
    (var rank_round_digits) so that sums taken in a different order never split a tie. -#}
{% macro min_rank(score, partition_by=none) -%}
    rank() over (
        {%- if partition_by is not none %} partition by {{ partition_by }}{% endif %}
        order by round({{ score }}, {{ var('rank_round_digits') }}) desc
    )
{%- endmacro %}
