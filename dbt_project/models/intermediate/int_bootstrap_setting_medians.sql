-- Bootstrap, step 1: for each replicate, resample each covered setting's counted attempts
-- with replacement (as many draws as counted attempts) and take the median of the
-- higher-is-better scores. Draws come from the hash chain in macros/bootstrap_hash.sql. A setting
-- is (suite, agent, task, budget); its hash key leaves the suite out on purpose, so a suite's
-- draws are the ones it would get alone in the warehouse (and a one-suite warehouse's numbers
-- are those from before suites were kept apart).
{%- set replicates = var('bootstrap_replicates') | int %}
{%- set seed = var('bootstrap_seed') | int %}
with

counted as (

    select counted.*
    from {{ ref('int_runs_counted') }} as counted
    inner join {{ ref('int_agents_covered') }} as covered
        on counted.suite_id = covered.suite_id
        and counted.agent_id = covered.agent_id

),

settings as (

    select
        {{ setting_columns() }},
        count(*)::ubigint as n_counted,
        {{ bootstrap_setting_key('agent_id', 'task_id', 'budget_seconds') }} as setting_key,
        row_number() over (order by {{ setting_columns() }}) as setting_id

    from counted
    group by {{ setting_columns() }}

),

counted_attempts as (

    select
        settings.setting_id,
        (counted.success_index - 1)::ubigint as attempt_index,
        counted.score_hib

    from counted
    inner join settings on {{ same_setting('counted', 'settings') }}

),

seed as (

    select ({{ seed }} % 4294967296)::ubigint as seed_value

),

seed_hash as (

    select {{ fmix32('seed_value') }} as seed_hash from seed

),

replicates as (

    select
        r.range::ubigint as replicate,
        xor(seed_hash.seed_hash, r.range::ubigint) as mixed

    from range({{ replicates }}) as r
    cross join seed_hash

),

replicate_hashes as (

    select replicate, {{ fmix32('mixed') }} as replicate_hash
    from replicates

),

setting_hashes as (

    select
        replicate_hashes.replicate,
        settings.setting_id,
        settings.n_counted,
        {{ fmix32('xor(replicate_hashes.replicate_hash, settings.setting_key)') }} as setting_hash

    from replicate_hashes
    cross join settings

),

draws as (

    -- one draw per counted attempt: draw index j = 0 .. n_counted - 1
    select
        setting_hashes.replicate,
        setting_hashes.setting_id,
        {{ fmix32('xor(setting_hashes.setting_hash, counted_attempts.attempt_index)') }}
            % setting_hashes.n_counted as drawn_index

    from setting_hashes
    inner join counted_attempts
        on setting_hashes.setting_id = counted_attempts.setting_id

),

drawn as (

    select
        draws.replicate,
        draws.setting_id,
        counted_attempts.score_hib

    from draws
    inner join counted_attempts
        on draws.setting_id = counted_attempts.setting_id
        and draws.drawn_index = counted_attempts.attempt_index

),

medians as (

    select
        settings.suite_id,
        drawn.replicate::integer as replicate,
        settings.agent_id,
        settings.task_id,
        settings.budget_seconds,
        quantile_cont(drawn.score_hib, 0.5) as median_score_hib

    from drawn
    inner join settings on drawn.setting_id = settings.setting_id
    group by {{ setting_columns('settings') }}, drawn.replicate

)

select * from medians
