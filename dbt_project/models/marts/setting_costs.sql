-- One row per setting (suite, agent, task, budget) with any attempt: tokens and cost over all its
-- attempts and over its counted attempts, cost per success and normalized points per dollar
-- (macro cost_summary). Unknown stays unknown: sums and means skip attempts without a recorded
-- value and are null when no attempt has one; nothing is ever read as 0.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('counted_attempts') }}

),

points as (

    select * from {{ ref('normalized_scores') }}

),

{{ cost_summary(setting_key(), points_column='points') }}
