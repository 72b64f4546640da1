-- Points per ranked setting, within each suite's (task, budget) cell over the suite's covered
-- agents. points (primary): anchored at the trivial prediction's score (int_cell_trivial_scores)
-- — an agent whose median is below it gets 0 and anchors nothing, the agents at or above it are
-- min-max scaled among themselves (best 1, worst 0, all equal 0.5), so no agent moves another's
-- points by being worse than trivial. A cell without a trivial score (imported runs, older
-- records) uses the paper's rule. points_paper: the paper's rule, min-max over every agent.
with

covered as (

    select * from {{ ref('int_agents_covered') }}

),

anchors as (

    select * from {{ ref('int_cell_trivial_scores') }}

),

settings as (

    select
        setting_scores.*,
        anchors.trivial_score_hib

    from {{ ref('setting_scores') }} as setting_scores
    inner join covered
        on setting_scores.suite_id = covered.suite_id
        and setting_scores.agent_id = covered.agent_id
    left join anchors on {{ same_cell('setting_scores', 'anchors') }}

),

normalized as (

    select
        {{ setting_columns() }},
        median_score_hib,
        trivial_score_hib,
        ({{ below_anchor('median_score_hib', 'trivial_score_hib') }})::boolean as below_trivial,
        ({{ anchored_points('median_score_hib', 'trivial_score_hib', cell_columns()) }})::double as points,
        ({{ min_max_points('median_score_hib', cell_columns()) }})::double as points_paper

    from settings

)

select * from normalized
