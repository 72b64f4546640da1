-- The raw schema: what the loader writes and dbt's sources read. Applied idempotently
-- (every statement may run again: IF NOT EXISTS, or a DROP NOT NULL that is already dropped). One row per attempt in raw.runs, keyed by
-- (run_space, run_id); columns mirror runner.attempts.records.RunRecord field for field, plus load bookkeeping.
create schema if not exists raw;

create table if not exists raw.runs (
    -- Where the run's id is unique. A tmlbench record: the folder holding its run folder,
    -- relative to the runs root, as a suite's runs_subdir names it ('demo', 'tml-v1', '.').
    -- An imported run: its source ('tml-bench'). Two suites' folders can hold the same run id
    -- (the demo and tml-v1 both run baseline-gbm on the same tasks); they are two runs.
    run_space               varchar not null,
    run_id                  varchar not null,
    schema_version          integer not null,
    created_at              timestamptz not null,
    finished_at             timestamptz,
    suite_id                varchar,

    agent_id                varchar not null,
    agent_kind              varchar not null,
    harness                 varchar not null,
    harness_version         varchar,
    provider                varchar,
    model_id                varchar,

    task_id                 varchar not null,
    metric_name             varchar,
    metric_direction        varchar check (metric_direction in ('maximize', 'minimize')),
    budget_seconds          integer check (budget_seconds > 0),
    instruction_profile     varchar,
    attempt_index           integer not null,
    seed                    bigint,

    sandbox_backend         varchar not null,
    sandbox_isolated        boolean not null,
    sandbox_unsafe          boolean not null,
    cpuset                  varchar,
    memory_limit_bytes      bigint,
    pids_limit              integer,
    disk_limit_bytes        bigint,

    -- this IN list spells out runner.attempts.records.Status (metric_direction's, runner.tasks.vocabulary.Direction);
    -- tests/test_status_list.py keeps both in step with Python and dbt's macros/vocabulary.sql
    status                  varchar not null check (status in (
        'success', 'invalid_submission', 'no_submission', 'timeout',
        'runtime_error', 'provider_error', 'harness_error')),
    score                   double,
    score_hib               double,
    validation_code         varchar,
    validation_message      varchar,
    error_message           varchar,
    local_validation_score  double,

    wall_seconds            double,
    cpu_seconds             double,
    peak_memory_bytes       bigint,
    exit_code               integer,
    limit_exceeded          varchar,

    tokens_in               bigint,
    tokens_out              bigint,
    cost_usd                double,
    requests                integer,
    retries                 integer,
    steps                   integer,
    provider_seconds        double,
    tool_seconds            double,
    egress_requests         integer,
    egress_denied           integer,
    egress_denied_hosts     map(varchar, integer),  -- refused 'host:port' -> count
    egress_bytes_up         bigint,
    egress_bytes_down       bigint,

    workspace_bytes         bigint,
    workspace_files         bigint,
    workspace_removed       boolean,
    workspace_listing_path  varchar,
    sandbox_notes           varchar[],
    provider_faults         integer,
    provider_fault_evidence varchar[],
    interrupted_calls       integer,
    failed_tokens_in        bigint,
    failed_tokens_out       bigint,
    rate_limited            integer,
    unknown_usage_calls     integer,
    other_requests          integer,
    forbidden_requests      integer,
    record_notes            varchar[],

    task_spec_sha256        varchar,
    public_manifest_sha256  varchar,
    trivial_score           double,  -- the trivial prediction's score on the run's holdout
    instructions_sha256     varchar,
    tmlbench_version        varchar,
    git_sha                 varchar,

    stdout_path             varchar,
    stderr_path             varchar,
    transcript_path         varchar,
    submission_path         varchar,
    submission_sha256       varchar,
    submission_normalized_sha256 varchar,

    -- load bookkeeping (not part of the record)
    source                  varchar not null,  -- 'tmlbench', or 'tml-bench' for imported results
    source_path             varchar,           -- the record file (or database) it came from
    record_sha256           varchar not null,  -- content hash: same run_id + same hash = unchanged
    loaded_at               timestamptz not null,
    source_fields           json,              -- imported rows: the source's fields with no column here
    check (status = 'success' or (score is null and score_hib is null)),
    check (status <> 'success' or metric_direction is not null),
    primary key (run_space, run_id)
);

-- Record schema 2 (agent usage): warehouses created before it get the columns here.
alter table raw.runs add column if not exists requests integer;
alter table raw.runs add column if not exists retries integer;
alter table raw.runs add column if not exists steps integer;
alter table raw.runs add column if not exists provider_seconds double;
alter table raw.runs add column if not exists tool_seconds double;
alter table raw.runs add column if not exists egress_requests integer;
alter table raw.runs add column if not exists egress_denied integer;
alter table raw.runs add column if not exists egress_bytes_up bigint;
alter table raw.runs add column if not exists egress_bytes_down bigint;
-- Record schema 3: which hosts the egress proxy refused.
alter table raw.runs add column if not exists egress_denied_hosts map(varchar, integer);
-- Record schema 4: the workspace when the attempt ended, and the sandbox's notes.
alter table raw.runs add column if not exists workspace_bytes bigint;
alter table raw.runs add column if not exists workspace_files bigint;
alter table raw.runs add column if not exists workspace_removed boolean;
alter table raw.runs add column if not exists workspace_listing_path varchar;
alter table raw.runs add column if not exists sandbox_notes varchar[];
-- Record schema 5: submission fingerprints; imports keep the source's other fields.
alter table raw.runs add column if not exists submission_sha256 varchar;
alter table raw.runs add column if not exists submission_normalized_sha256 varchar;
alter table raw.runs add column if not exists source_fields json;
-- Record schema 6: provider faults apart from the agent's, the task's trivial score, notes.
alter table raw.runs add column if not exists provider_faults integer;
alter table raw.runs add column if not exists provider_fault_evidence varchar[];
alter table raw.runs add column if not exists interrupted_calls integer;
alter table raw.runs add column if not exists failed_tokens_in bigint;
alter table raw.runs add column if not exists failed_tokens_out bigint;
alter table raw.runs add column if not exists rate_limited integer;
alter table raw.runs add column if not exists trivial_score double;
alter table raw.runs add column if not exists record_notes varchar[];
-- Record schema 7: the gateway's allow-list and the calls whose usage is unknown.
alter table raw.runs add column if not exists unknown_usage_calls integer;
alter table raw.runs add column if not exists other_requests integer;
alter table raw.runs add column if not exists forbidden_requests integer;
-- Imported results may lack what every tmlbench record has (older TML-bench databases have no
-- budget, model or provenance columns): NULL there means "not recorded by the source".
alter table raw.runs alter column harness_version drop not null;
alter table raw.runs alter column metric_name drop not null;
alter table raw.runs alter column metric_direction drop not null;
alter table raw.runs alter column budget_seconds drop not null;
alter table raw.runs alter column instruction_profile drop not null;
alter table raw.runs alter column seed drop not null;
alter table raw.runs alter column task_spec_sha256 drop not null;
alter table raw.runs alter column tmlbench_version drop not null;

create table if not exists raw.tasks (
    task_id                 varchar primary key,
    title                   varchar not null,
    task_type               varchar not null,
    metric_name             varchar not null,
    metric_direction        varchar not null check (metric_direction in ('maximize', 'minimize')),
    id_column               varchar not null,
    target_column           varchar not null,
    start_date              date,
    kaggle_competition      varchar,
    twin_default_rows       integer,
    spec_sha256             varchar,
    loaded_at               timestamptz not null
);

create table if not exists raw.agents (
    agent_id                varchar primary key,
    kind                    varchar not null,
    title                   varchar,
    harness                 varchar,
    harness_version         varchar,
    provider                varchar,
    model_id                varchar,
    knowledge_cutoff        date,
    price_in_per_mtok_usd   double,  -- USD per million input tokens, where known
    price_out_per_mtok_usd  double,
    source                  varchar not null,  -- 'spec' (agents/*.yaml) or 'tml-bench' (imported)
    loaded_at               timestamptz not null
);

-- Suite specs (suites/*.yaml), replaced on every load: the rules a suite's runner applies per
-- setting that the marts report on. Runs name their suite (raw.runs.suite_id).
create table if not exists raw.suites (
    suite_id                varchar primary key,
    title                   varchar not null,
    attempts                integer not null check (attempts >= 1),  -- successes wanted per setting
    attempt_ceiling         integer not null check (attempt_ceiling >= attempts),  -- agent attempts per setting
    harness_error_ceiling   integer not null check (harness_error_ceiling >= 1),  -- harness_error attempts per setting before it gets no more
    spec_sha256             varchar not null,
    loaded_at               timestamptz not null
);
-- The folder (below the runs root) whose records the suite counts: raw.runs.run_space.
alter table raw.suites add column if not exists runs_subdir varchar;
-- provider_error attempts per setting before it gets no more (null: loaded before it existed).
alter table raw.suites add column if not exists provider_error_ceiling integer;

-- Every setting a suite file lists (agents × tasks × budgets), replaced with raw.suites: a run
-- counts for a suite when it lies in the suite's runs_subdir and its setting is one of these, so
-- runs shared by suites (tml-v1's baselines) count for each, and an agent removed from a suite
-- leaves its marts while its runs stay in raw.runs.
create table if not exists raw.suite_settings (
    suite_id                varchar not null,
    agent_id                varchar not null,
    task_id                 varchar not null,
    budget_seconds          integer not null check (budget_seconds > 0),
    primary key (suite_id, agent_id, task_id, budget_seconds)
);

-- Reference scores the original TML-bench recorded per competition (its `baselines` table:
-- e.g. 'hgb' and 'constant' models), imported with its runs. tmlbench's own baselines are
-- agents with runs; these are kept for comparison and never enter a mart's arithmetic.
create table if not exists raw.baselines (
    source                  varchar not null,  -- 'tml-bench'
    task_id                 varchar not null,  -- the source's competition_id
    baseline_type           varchar not null,
    created_at              timestamptz,
    metric_name             varchar,
    score                   double,            -- the source's score_raw
    score_normalized        double,
    local_validation_score  double,
    submission_sha256       varchar,
    submission_normalized_sha256 varchar,
    task_spec_sha256        varchar,
    public_manifest_sha256  varchar,
    source_fields           json,              -- the source's columns with no column here
    source_path             varchar not null,
    record_sha256           varchar not null,  -- content hash: same key + same hash = unchanged
    loaded_at               timestamptz not null,
    primary key (source, task_id, baseline_type)
);

-- The loader's index of the record files it has loaded (load bookkeeping, not data): a load stats
-- every record.json and reads only the files that are not here with the same size, mtime, ctime
-- and inode, or whose run is no longer in raw.runs with this content. Rejected files are never
-- indexed: they are read, and reported, on every load. One row per path (the loader replaces a
-- path's row; no primary key: keeping one costs more than the insert itself).
create table if not exists raw.record_files (
    path                    varchar not null,     -- as raw.runs.source_path
    size                    bigint not null,
    mtime_ns                bigint not null,
    ctime_ns                bigint not null,
    inode                   ubigint not null,
    record_sha256           varchar not null,
    run_id                  varchar not null,
    indexed_at              timestamptz not null
);

-- The resumption logs (<runs>/<runs_subdir>/resumptions.jsonl, runner.suites.resumptions) as the last
-- load found them, one row per forgiven run id: resuming a setting stopped at a fault ceiling
-- forgives the faults recorded so far, which its ceilings no longer count (the runs stay in
-- raw.runs as they are). A fault is forgiven when its (run_space, run_id) is here.
create table if not exists raw.resumptions (
    run_space               varchar not null,  -- the folder holding the log, as raw.runs.run_space
    run_id                  varchar not null,  -- a forgiven fault's run id (in run_space)
    suite_id                varchar,           -- the suite the line names (null: written before lines named it)
    setting                 varchar not null,  -- the resumed setting's key, agent|task|budget
    resumed_at              timestamptz not null,
    resumed_by              varchar not null,  -- what resumed it: a command, a Dagster run
    source_path             varchar not null,  -- the log
    line_number             integer not null,  -- the line of the log (from 1)
    file_sha256             varchar not null,  -- the log's content hash when loaded: same hash = unchanged
    loaded_at               timestamptz not null,
    primary key (source_path, line_number, run_id)
);
