-- One row per duplicate submission: a (suite, task, canonical fingerprint) that two or more of
-- the suite's attempts submitted. within_setting: one setting (agent, task, budget) holds two or
-- more of them (a cached or replayed answer: that setting's attempts are not independent);
-- across_agents: two or more agents submitted it. Built from submission_twins by grouping, never
-- by pairing attempts, so its cost grows with the attempts, not with their square.
{%- set run_ids_shown = 20 %}
with

twins as (

    select * from {{ ref('submission_twins') }}

),

per_setting as (

    select
        suite_id,
        task_id,
        submission_normalized_sha256,
        agent_id,
        budget_seconds,
        count(*) as attempts,
        count(*) filter (where is_counted) as counted

    from twins
    group by suite_id, task_id, submission_normalized_sha256, agent_id, budget_seconds

),

settings as (

    select
        suite_id,
        task_id,
        submission_normalized_sha256,
        count(*) as n_settings,
        count(*) filter (where attempts >= 2) as n_replayed_settings,
        count(*) filter (where counted >= 2) as n_replayed_counted_settings,
        count(distinct agent_id) as n_agents,
        list(distinct agent_id order by agent_id) as agent_ids

    from per_setting
    group by suite_id, task_id, submission_normalized_sha256

),

attempts as (

    select
        suite_id,
        task_id,
        submission_normalized_sha256,
        count(*) as n_attempts,
        count(*) filter (where is_counted) as n_counted,
        -- the oldest first: the original answer, then its replays
        list(run_id order by created_at, run_id) as ordered_run_ids,
        min(created_at) as first_created_at,
        max(created_at) as last_created_at,
        min(score) as min_score,
        max(score) as max_score

    from twins
    group by suite_id, task_id, submission_normalized_sha256

),

final as (

    select
        attempts.suite_id,
        attempts.task_id,
        attempts.submission_normalized_sha256,
        attempts.n_attempts::bigint as n_attempts,
        settings.n_agents::bigint as n_agents,
        settings.n_settings::bigint as n_settings,
        settings.n_replayed_settings::bigint as n_replayed_settings,
        attempts.n_counted::bigint as n_counted,
        settings.n_replayed_counted_settings::bigint as n_replayed_counted_settings,
        (settings.n_replayed_settings > 0) as within_setting,
        (settings.n_replayed_counted_settings > 0) as within_setting_counted,
        (settings.n_agents >= 2) as across_agents,
        settings.agent_ids::varchar[] as agent_ids,
        attempts.ordered_run_ids[1:{{ run_ids_shown }}]::varchar[] as run_ids,
        attempts.ordered_run_ids[1]::varchar as first_run_id,
        attempts.first_created_at,
        attempts.last_created_at,
        attempts.min_score::double as min_score,
        attempts.max_score::double as max_score

    from attempts
    inner join settings
        on attempts.suite_id = settings.suite_id
        and attempts.task_id = settings.task_id
        and attempts.submission_normalized_sha256 = settings.submission_normalized_sha256

)

select * from final
