-- The run explorer's attempts and the one it opens: one row per (suite, attempt) the suite counts
-- (marts.suite_runs), with every column of raw.runs (the record field for field,
-- warehouse/ddl/raw.sql; the record view shows them all). The record's own suite_id (the suite
-- that ran it first) is `recorded_suite_id`, as stg_raw__runs names it: `suite_id` is the suite
-- whose explorer lists the attempt, the key of every display model. An attempt no suite counts
-- has a null suite_id (no page lists it; a query of every suite's attempts does). The columns
-- are listed, not `runs.*`: a new record field reaches the explorer when it is added here and
-- to the contract, and never breaks the build before.
with

runs as (

    select * from {{ source('raw', 'runs') }}

),

suite_runs as (

    select * from {{ ref('suite_runs') }}

),

final as (

    select
        suite_runs.suite_id,
        runs.run_space,
        runs.run_id,
        runs.schema_version,
        runs.created_at,
        runs.finished_at,
        runs.suite_id as recorded_suite_id,
        runs.agent_id,
        runs.agent_kind,
        runs.harness,
        runs.harness_version,
        runs.provider,
        runs.model_id,
        runs.task_id,
        runs.metric_name,
        runs.metric_direction,
        runs.budget_seconds,
        runs.instruction_profile,
        runs.attempt_index,
        runs.seed,
        runs.sandbox_backend,
        runs.sandbox_isolated,
        runs.sandbox_unsafe,
        runs.cpuset,
        runs.memory_limit_bytes,
        runs.pids_limit,
        runs.disk_limit_bytes,
        runs.status,
        runs.score,
        runs.score_hib,
        runs.validation_code,
        runs.validation_message,
        runs.error_message,
        runs.local_validation_score,
        runs.wall_seconds,
        runs.cpu_seconds,
        runs.peak_memory_bytes,
        runs.exit_code,
        runs.limit_exceeded,
        runs.tokens_in,
        runs.tokens_out,
        runs.cost_usd,
        runs.requests,
        runs.retries,
        runs.steps,
        runs.provider_seconds,
        runs.tool_seconds,
        runs.egress_requests,
        runs.egress_denied,
        runs.egress_denied_hosts,
        runs.egress_bytes_up,
        runs.egress_bytes_down,
        runs.workspace_bytes,
        runs.workspace_files,
        runs.workspace_removed,
        runs.workspace_listing_path,
        runs.sandbox_notes,
        runs.provider_faults,
        runs.provider_fault_evidence,
        runs.interrupted_calls,
        runs.failed_tokens_in,
        runs.failed_tokens_out,
        runs.rate_limited,
        runs.unknown_usage_calls,
        runs.other_requests,
        runs.forbidden_requests,
        runs.record_notes,
        runs.task_spec_sha256,
        runs.public_manifest_sha256,
        runs.trivial_score,
        runs.instructions_sha256,
        runs.tmlbench_version,
        runs.git_sha,
        runs.stdout_path,
        runs.stderr_path,
        runs.transcript_path,
        runs.submission_path,
        runs.submission_sha256,
        runs.submission_normalized_sha256,
        runs.source,
        runs.source_path,
        runs.record_sha256,
        runs.loaded_at,
        runs.source_fields

    from runs
    left join suite_runs
        on runs.run_space = suite_runs.run_space
        and runs.run_id = suite_runs.run_id

)

select * from final
