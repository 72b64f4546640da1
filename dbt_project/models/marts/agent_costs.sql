-- One row per (suite, agent) with any attempt: tokens and cost over all its attempts in the suite
-- (every setting) and over its counted attempts, cost per success, and primary score (the
-- suite's) per dollar (macro cost_summary). Unknown stays unknown: sums and means skip attempts
-- without a recorded value and are null when no attempt has one; nothing is ever read as 0.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

counted as (

    select * from {{ ref('counted_attempts') }}

),

points as (

    select suite_id, agent_id, score
    from {{ ref('leaderboard') }}
    where variant = 'best_budget'

),

{{ cost_summary(['suite_id', 'agent_id'], points_column='score') }}
