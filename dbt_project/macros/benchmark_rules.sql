{#- Shared pieces of the benchmark's arithmetic, used by the point estimates and the bootstrap. -#}

{#- Min-max scaling within a partition: best 1, worst 0, all equal 0.5 (the paper's rule). -#}
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

{#- The primary points: min-max scaling anchored at the trivial prediction's score. A value at or
    below the anchor gets 0 and takes no part in the scale; the values above it are min-max
    scaled among themselves (best 1, worst 0, all equal 0.5). With a null anchor (a cell without
    a trivial score) every value takes part: exactly min_max_points. So a value worse than the
    trivial prediction moves no other value's points, however absurd it is. Both sides are
    rounded (var rank_round_digits) first, so float noise never decides whether a value beats
    the anchor: a constant submission of the training mean is at the anchor, not 1e-16 above. -#}
{% macro anchored_points(value, anchor, partition_by) -%}
    {%- set beats = 'coalesce(' ~ beats_anchor(value, anchor) ~ ', true)' -%}
    {%- set scaled = '(case when ' ~ beats ~ ' then ' ~ value ~ ' end)' -%}
    case
        when not {{ beats }} then 0.0
        when max({{ scaled }}) over (partition by {{ partition_by }})
            > min({{ scaled }}) over (partition by {{ partition_by }})
        then ({{ value }} - min({{ scaled }}) over (partition by {{ partition_by }}))
            / (max({{ scaled }}) over (partition by {{ partition_by }})
               - min({{ scaled }}) over (partition by {{ partition_by }}))
        else 0.5
    end
{%- endmacro %}

{#- Whether a value beats the anchor (null: no anchor), as anchored_points decides it. -#}
{% macro beats_anchor(value, anchor) -%}
    case
        when {{ anchor }} is not null
        then round({{ value }}, {{ var('rank_round_digits') }})
            > round({{ anchor }}, {{ var('rank_round_digits') }})
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
