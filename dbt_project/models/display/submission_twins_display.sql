-- The run explorer's twins of an opened attempt (other attempts of its task with the same
-- answer): marts.submission_twins as the dashboard reads it. The pages read display models
-- only, so a mart can change shape without breaking a page: this model's contract is the
-- page's.
with

submission_twins as (

    select * from {{ ref('submission_twins') }}

),

final as (

    select
        suite_id,
        run_id,
        task_id,
        submission_normalized_sha256,
        agent_id,
        budget_seconds,
        created_at,
        status,
        score,
        submission_sha256,
        is_counted,
        success_index,
        n_twins,
        n_same_setting_twins,
        n_other_agent_twins

    from submission_twins

)

select * from final
