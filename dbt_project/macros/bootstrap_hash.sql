{#- Deterministic pseudo-random draws for the bootstrap, reproducible outside SQL.

    Every draw is a pure function of (seed, replicate, setting, draw index): no random()
    or setseed(), whose sequence depends on DuckDB's threads. The mixer is murmur3's
    32-bit finalizer (fmix32) on UBIGINT values below 2^32: each product of two 32-bit
    numbers stays below 2^64, and `% 2^32` masks it back to 32 bits. The chain is

        seed_hash      = fmix32(seed mod 2^32)
        replicate_hash = fmix32(seed_hash xor replicate)
        setting_hash   = fmix32(replicate_hash xor setting_key)
        draw_hash      = fmix32(setting_hash xor draw_index)
        drawn attempt  = draw_hash mod n_counted   (0-based, in first-N order)

    with setting_key = the first 8 hex digits of md5('<agent_id>/<task_id>/<budget_seconds>')
    read as an integer. tests/dbt_project/test_marts_crosscheck.py recomputes the same chain in numpy.
-#}
{% macro fmix32(x) -%}
    {%- set m = '4294967296::ubigint' -%}
    {%- set h1 = 'xor((' ~ x ~ '), (' ~ x ~ ') >> 16)' -%}
    {%- set h2 = '((' ~ h1 ~ ') * 2246822507::ubigint % ' ~ m ~ ')' -%}
    {%- set h3 = 'xor(' ~ h2 ~ ', ' ~ h2 ~ ' >> 13)' -%}
    {%- set h4 = '((' ~ h3 ~ ') * 3266489909::ubigint % ' ~ m ~ ')' -%}
    xor({{ h4 }}, {{ h4 }} >> 16)
{%- endmacro %}

{% macro bootstrap_setting_key(agent_id, task_id, budget_seconds) -%}
    ('0x' || left(md5({{ agent_id }} || '/' || {{ task_id }} || '/' || ({{ budget_seconds }})::varchar), 8))::ubigint
{%- endmacro %}
