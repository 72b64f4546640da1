-- Reliability under repetition, one row per (setting, k), k = 1..N (the suite's `attempts`).
-- Over the setting's counted attempts — the ones its success rate counts (setting_success_rates'
-- agent_attempts and successes: harness_error and provider_error are not the agent's) —
--   pass_k: the probability that k attempts drawn without replacement all succeed, τ-bench's
--     unbiased estimator C(c, k) ÷ C(n, k) (macro falling_ratio: a product, never factorials);
--   expected_worst_points: the expected minimum, over a uniformly random k-subset of those
--     attempts, of each attempt's points on its cell's primary scale (macro attempt_points; a
--     failed attempt 0), computed exactly from the order statistics: with the n points sorted
--     ascending, E[min of k] = Σ_i v_i · C(n − i, k − 1) ÷ C(n, k).
-- Both are null when k > n (k attempts were never made); the points are null in a cell no
-- ranked agent has normalized (no scale).
with

settings as (

    select * from {{ ref('setting_success_rates') }}

),

suites as (

    select suite_id, counted_successes from {{ ref('int_suites') }}

),

setting_ks as (

    select
        {{ setting_columns('settings') }},
        settings.agent_attempts as n,
        settings.successes as c,
        settings.success_rate,
        unnest(range(1, suites.counted_successes + 1)) as k

    from settings
    inner join suites on settings.suite_id = suites.suite_id

),

-- the cell's primary scale: the anchor and the lowest and highest median taking part
cell_scales as (

    select
        {{ cell_columns() }},
        any_value(trivial_score_hib) as trivial_score_hib,
        min(median_score_hib) filter (where not coalesce(below_trivial, false)) as low,
        max(median_score_hib) filter (where not coalesce(below_trivial, false)) as high

    from {{ ref('normalized_scores') }}
    group by {{ cell_columns() }}

),

attempt_points as (

    select
        {{ setting_columns('runs') }},
        ({{ attempt_points(
            "runs.status = 'success'", 'runs.score_hib',
            'cell_scales.trivial_score_hib', 'cell_scales.low', 'cell_scales.high'
        ) }})::double as points,
        runs.run_id

    from {{ ref('int_setting_runs') }} as runs
    inner join cell_scales on {{ same_cell('runs', 'cell_scales') }}
    where {{ agents_own_attempt('runs.status') }}

),

sorted_points as (

    select
        *,
        -- 1 = the lowest points; ties in any order (equal values weigh the same)
        row_number() over (
            partition by {{ setting_columns() }} order by points, run_id
        ) as points_index

    from attempt_points

),

expected_worst as (

    select
        {{ setting_columns('setting_ks') }},
        setting_ks.k,
        -- P(the i-th lowest is a k-subset's minimum) = C(n − i, k − 1) ÷ C(n, k)
        --   = k/n · C(n − i, k − 1) ÷ C(n − 1, k − 1)
        sum(
            sorted_points.points
            * setting_ks.k / setting_ks.n
            * {{ falling_ratio('setting_ks.n - sorted_points.points_index', 'setting_ks.n - 1', 'setting_ks.k - 1') }}
        ) as expected_worst_points

    from setting_ks
    inner join sorted_points on {{ same_setting('setting_ks', 'sorted_points') }}
    where setting_ks.k <= setting_ks.n
    group by all

),

final as (

    select
        {{ setting_columns('setting_ks') }},
        setting_ks.k::integer as k,
        setting_ks.n::bigint as agent_attempts,
        setting_ks.c::bigint as successes,
        setting_ks.success_rate::double as success_rate,
        -- rounded to 12 decimals: a parallel sum adds in no fixed order, and its last bits
        -- must not change the bytes of a report drawn from the same warehouse
        round(case
            when setting_ks.k <= setting_ks.n
            then {{ falling_ratio('setting_ks.c', 'setting_ks.n', 'setting_ks.k') }}
        end, 12)::double as pass_k,
        round(expected_worst.expected_worst_points, 12)::double as expected_worst_points

    from setting_ks
    left join expected_worst
        on {{ same_setting('setting_ks', 'expected_worst') }}
        and setting_ks.k = expected_worst.k

)

select * from final
