-- Per (suite, covered agent): mean and sample standard deviation (n − 1) of its task ranks.
with

task_ranks as (

    select * from {{ ref('task_ranks') }}

),

stability as (

    select
        suite_id,
        agent_id,
        avg(rank)::double as mean_rank,
        stddev_samp(rank)::double as rank_std,
        count(*)::bigint as n_tasks

    from task_ranks
    group by suite_id, agent_id

)

select * from stability
