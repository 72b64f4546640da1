-- Per agent: the median over its settings of IQR ÷ |median| of the counted attempts
-- (settings with a zero median or no counted attempt are skipped). Every agent with an
-- attempt appears; is_covered says whether it is on the leaderboard.
with

settings as (

    select * from {{ ref('setting_scores') }}

),

covered as (

    select * from {{ ref('int_agents_covered') }}

),

stability as (

    select
        agent_id,
        quantile_cont(rel_iqr, 0.5)::double as rel_iqr,
        count(rel_iqr)::bigint as n_settings

    from settings
    group by agent_id

),

final as (

    select
        stability.*,
        stability.agent_id in (select agent_id from covered) as is_covered

    from stability

)

select * from final
