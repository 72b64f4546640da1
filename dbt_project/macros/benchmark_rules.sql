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

{#- The primary points: min-max scaling anchored at the trivial prediction's score. A value below
    the anchor gets 0 and takes no part in the scale; the values at or above it are min-max scaled
    among themselves (best 1, worst 0, all equal 0.5). With a null anchor (a cell without a
    trivial score) every value takes part: exactly min_max_points. So a value worse than the
    trivial prediction moves no other value's points, however absurd it is, and the lowest the
    scale's bottom can sit is the trivial score itself: the constant baseline, which submits the
    trivial prediction, is the floor it always was. -#}
{% macro anchored_points(value, anchor, partition_by) -%}
    {%- set takes_part = 'not coalesce(' ~ below_anchor(value, anchor) ~ ', false)' -%}
    {%- set scaled = '(case when ' ~ takes_part ~ ' then ' ~ value ~ ' end)' -%}
    case
        when not {{ takes_part }} then 0.0
        when max({{ scaled }}) over (partition by {{ partition_by }})
            > min({{ scaled }}) over (partition by {{ partition_by }})
        then ({{ value }} - min({{ scaled }}) over (partition by {{ partition_by }}))
            / (max({{ scaled }}) over (partition by {{ partition_by }})
               - min({{ scaled }}) over (partition by {{ partition_by }}))
        else 0.5
    end
{%- endmacro %}

{#- Whether a value is below the anchor (null: no anchor), as anchored_points decides it. Within
    var trivial_tolerance (relative) of the anchor is at it: a constant submission of the
    training mean scores the trivial score up to float noise, and noise never decides. -#}
{% macro below_anchor(value, anchor) -%}
    case
        when {{ anchor }} is not null
        then {{ value }} < {{ anchor }} - {{ var('trivial_tolerance') }} * greatest(1.0, abs({{ anchor }}))
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

{#- The ratio of two falling factorials, Π_{j=0..terms−1} (top − j) ÷ (bottom − j): C(top, terms)
    ÷ C(bottom, terms) as a product of `terms` factors, each at most 1 when top ≤ bottom, so it
    neither overflows (a factorial of 171 already does in a double) nor loses the exactness of
    small counts; a factor top − j = 0 makes it 0 (C(top, terms) = 0 when terms > top). 1 for
    terms = 0 (the empty product). The caller keeps terms ≤ bottom. -#}
{% macro falling_ratio(top, bottom, terms) -%}
    coalesce(
        list_product(list_transform(
            range({{ terms }}), lambda j: ({{ top }} - j)::double / ({{ bottom }} - j)
        )),
        1.0
    )
{%- endmacro %}

{#- An attempt's points on its cell's primary scale (normalized_scores), for the per-attempt
    reliability marts: the linear map the cell applies to its settings' medians (anchored at the
    trivial score; `low`/`high`: the lowest and highest median taking part), applied to one
    attempt's higher-is-better score and kept within [0, 1]. An attempt below the anchor gets 0,
    as a setting does; a failed attempt (no score) gets 0, the scale's floor; a scale without a
    span (one taking-part median, or all equal) gives 0.5, as it gives its settings. -#}
{% macro attempt_points(succeeded, value, anchor, low, high) -%}
    case
        when not {{ succeeded }} then 0.0
        when coalesce({{ below_anchor(value, anchor) }}, false) then 0.0
        when {{ high }} > {{ low }}
        then greatest(0.0, least(1.0, ({{ value }} - {{ low }}) / ({{ high }} - {{ low }})))
        else 0.5
    end
{%- endmacro %}
