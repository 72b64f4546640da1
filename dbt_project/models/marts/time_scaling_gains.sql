-- Per (suite, covered agent, budget step): what the next larger budget adds to the mean
-- normalized points over tasks (the paper's "marginal gains", e.g. 240→600 s, 600→1200 s).
-- A step joins two consecutive budgets of the agent's time_scaling rows; a negative gain is a
-- loss.
with

scaling as (

    select * from {{ ref('time_scaling') }}

),

steps as (

    select
        suite_id,
        agent_id,
        lag(budget_seconds) over by_budget as from_budget_seconds,
        budget_seconds as to_budget_seconds,
        lag(mean_points) over by_budget as from_mean_points,
        mean_points as to_mean_points

    from scaling
    window by_budget as (partition by suite_id, agent_id order by budget_seconds)

),

gains as (

    select
        suite_id,
        agent_id,
        from_budget_seconds,
        to_budget_seconds,
        from_mean_points,
        to_mean_points,
        (to_mean_points - from_mean_points)::double as gain

    from steps
    where from_budget_seconds is not null

)

select * from gains
