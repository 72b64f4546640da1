-- Per (suite, agent), over all its attempts in the suite (every setting, every attempt):
-- successes ÷ attempts and one count per status.
with

runs as (

    select * from {{ ref('int_setting_runs') }}

),

rates as (

    select
        suite_id,
        agent_id,
        {{ status_counts() }}

    from runs
    group by suite_id, agent_id

)

select * from rates
