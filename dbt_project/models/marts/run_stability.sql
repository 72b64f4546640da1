-- Per (suite, agent): the median over its settings of IQR ÷ |median| of the counted attempts
-- (settings with a zero median or no counted attempt are skipped). Every agent with an
-- attempt in the suite appears; is_covered says whether it is on the suite's leaderboard.
with

settings as (

    select * from {{ ref('setting_scores') }}

),

covered as (

    select * from {{ ref('int_agents_covered') }}

),

stability as (

    select
        suite_id,
        agent_id,
        quantile_cont(rel_iqr, 0.5)::double as rel_iqr,
        count(rel_iqr)::bigint as n_settings

    from settings
    group by suite_id, agent_id

),

final as (

    select
        stability.*,
        covered.agent_id is not null as is_covered

    from stability
    left join covered
        on stability.suite_id = covered.suite_id
        and stability.agent_id = covered.agent_id

)

select * from final
