with

source as (

    select * from {{ source('raw', 'runs') }}

),

renamed as (

    select
        -- ids: a run is (run_space, run_id); run ids repeat across spaces (raw.runs)
        run_space,
        run_id,
        agent_id,
        task_id,
        -- the suite that ran it first (several suites can count it: int_setting_runs)
        suite_id as recorded_suite_id,

        -- setting and attempt
        budget_seconds::integer as budget_seconds,
        attempt_index,
        instruction_profile,
        agent_kind,
        harness,
        harness_version,
        provider,
        model_id,
        sandbox_backend,

        -- outcome
        status,
        metric_name,
        metric_direction,
        case when status = 'success' then score end as score,
        -- the higher-is-better score, derived from the raw metric and its direction;
        -- the recorded one must agree (data test in stg_raw__runs.yml)
        case
            when status = 'success' and metric_direction = 'maximize' then score
            when status = 'success' and metric_direction = 'minimize' then -score
        end as score_hib,
        score_hib as recorded_score_hib,

        -- resources and cost
        wall_seconds,
        cpu_seconds,
        peak_memory_bytes,
        tokens_in,
        tokens_out,
        cost_usd,
        requests,
        retries,
        steps,
        provider_seconds,
        tool_seconds,
        egress_requests,
        egress_denied,
        egress_denied_hosts,
        egress_bytes_up,
        egress_bytes_down,
        workspace_bytes,
        workspace_files,
        workspace_removed,
        workspace_listing_path,
        sandbox_notes,
        provider_faults,
        provider_fault_evidence,
        interrupted_calls,
        failed_tokens_in,
        failed_tokens_out,
        rate_limited,
        -- calls whose usage the provider owed and never reported; the gateway's other and
        -- forbidden requests (record schema 7; null: older records, or no gateway)
        unknown_usage_calls,
        other_requests,
        forbidden_requests,
        record_notes,
        -- the trivial prediction's score on the run's holdout (null: imported, or older records)
        trivial_score,

        -- the submission's fingerprints (bytes; canonical content)
        submission_sha256,
        submission_normalized_sha256,

        -- provenance
        source as load_source,
        source_fields,
        tmlbench_version,
        git_sha,

        -- timestamps
        created_at,
        finished_at,
        loaded_at

    from source

)

select * from renamed
