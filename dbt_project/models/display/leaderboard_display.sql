-- What the dashboard's leaderboard shows, one row per (suite, ranked agent, variant): the ranking,
-- the primary variant's bootstrap interval and P(rank 1), success rate, mean task rank ± sd,
-- the badges (coverage, contamination, duplicate submissions) and the agent's spec metadata.
-- The badges are labels only: every number in them comes from a mart, the suite's own rows.
-- The agent's spec metadata (raw.agents) is the same in every suite. In a provisional suite
-- (marts.suite_status: k of n settings complete, k < n) every row says so: the agents are ranked
-- among those already complete in all their settings, and the ranks may change.
with

leaderboard as (

    select * from {{ ref('leaderboard') }}

),

uncertainty as (

    select * from {{ ref('leaderboard_uncertainty') }}

),

success_rates as (

    select * from {{ ref('success_rates') }}

),

rank_stability as (

    select * from {{ ref('rank_stability') }}

),

run_stability as (

    select * from {{ ref('run_stability') }}

),

agents as (

    select * from {{ ref('stg_raw__agents') }}

),

coverage as (

    select
        suite_id,
        agent_id,
        count(*) as settings,
        count(*) filter (where missing = 0) as complete_settings

    from {{ ref('coverage') }}
    group by suite_id, agent_id

),

suite_status as (

    select * from {{ ref('suite_status') }}

),

-- only the tasks the suite ran count for contamination
contamination as (

    select
        flags.suite_id,
        flags.agent_id,
        string_agg(flags.task_id, ', ' order by flags.task_id) filter (where flags.contaminated)
            as contaminated_tasks,
        bool_and(flags.contaminated is not null) as cutoff_known

    from {{ ref('contamination_flags') }} as flags
    where exists (
        select 1
        from {{ ref('coverage') }} as coverage
        where coverage.suite_id = flags.suite_id and coverage.task_id = flags.task_id
    )
    group by flags.suite_id, flags.agent_id

),

duplicates as (

    select
        suite_id,
        agent_id,
        count(*) filter (where duplicated_counted) as replayed_settings,
        sum(n_shared_with_other_agents) as shared_attempts,
        bool_and(n_counted_fingerprinted = n_counted) as fingerprints_known

    from {{ ref('setting_duplicates') }}
    group by suite_id, agent_id

),

final as (

    select
        leaderboard.suite_id,
        leaderboard.rank::bigint as rank,
        leaderboard.agent_id,
        leaderboard.score::double as score,
        uncertainty.score_low::double as score_low,
        uncertainty.score_high::double as score_high,
        printf('%.3f–%.3f', uncertainty.score_low, uncertainty.score_high) as score_interval,
        uncertainty.p_rank_1::double as p_rank_1,
        success_rates.success_rate::double as success_rate,
        -- the sd of one task's rank is undefined: "–"
        printf(
            '%.2f ± %s',
            rank_stability.mean_rank,
            coalesce(printf('%.2f', rank_stability.rank_std), '–')
        ) as mean_rank_sd,
        rank_stability.mean_rank::double as mean_rank,
        rank_stability.rank_std::double as rank_std,
        -- the badges are short: the leaderboard's first columns fit one 1280-px screen, and
        -- the column headers' help (app/app_pages/leaderboard.py) says what they mean
        case when coverage.complete_settings = coverage.settings then '✓ ' else '✗ ' end
            || coverage.complete_settings || '/' || coverage.settings
            as coverage,
        case
            when contamination.contaminated_tasks is not null
                then '⚠ ' || contamination.contaminated_tasks
            when contamination.cutoff_known then '✓ clean'
            else 'cutoff unknown'
        end as contamination,
        case
            when duplicates.replayed_settings > 0 or duplicates.shared_attempts > 0
                then concat_ws(
                    ' · ',
                    case when duplicates.replayed_settings > 0
                        then '⚠ ' || duplicates.replayed_settings || ' setting(s) replayed'
                    end,
                    case when duplicates.shared_attempts > 0
                        then '↔ ' || duplicates.shared_attempts || ' attempt(s) shared'
                    end
                )
            when duplicates.fingerprints_known then '✓ distinct'
            else 'unknown'
        end as duplicates,
        success_rates.successes::bigint as successes,
        success_rates.attempts::bigint as attempts,
        run_stability.rel_iqr::double as run_rel_iqr,
        leaderboard.n_cells::bigint as n_cells,
        leaderboard.variant,
        agents.agent_title,
        agents.harness,
        agents.provider,
        agents.model_id,
        coalesce(suite_status.provisional, false) as provisional,
        case when suite_status.provisional then '⚠ provisional: ' else '✓ ' end
            || suite_status.settings_complete || ' of ' || suite_status.settings_expected
            || ' settings' as suite_coverage,
        (suite_status.agents_expected - suite_status.agents_ranked)::bigint as unranked_agents

    from leaderboard
    left join uncertainty
        on leaderboard.suite_id = uncertainty.suite_id
        and leaderboard.agent_id = uncertainty.agent_id
        and leaderboard.variant = 'best_budget'
    left join success_rates
        on leaderboard.suite_id = success_rates.suite_id
        and leaderboard.agent_id = success_rates.agent_id
    left join rank_stability
        on leaderboard.suite_id = rank_stability.suite_id
        and leaderboard.agent_id = rank_stability.agent_id
    left join run_stability
        on leaderboard.suite_id = run_stability.suite_id
        and leaderboard.agent_id = run_stability.agent_id
    left join agents on leaderboard.agent_id = agents.agent_id
    left join coverage
        on leaderboard.suite_id = coverage.suite_id
        and leaderboard.agent_id = coverage.agent_id
    left join contamination
        on leaderboard.suite_id = contamination.suite_id
        and leaderboard.agent_id = contamination.agent_id
    left join duplicates
        on leaderboard.suite_id = duplicates.suite_id
        and leaderboard.agent_id = duplicates.agent_id
    left join suite_status
        on leaderboard.suite_id = suite_status.suite_id

)

select * from final
