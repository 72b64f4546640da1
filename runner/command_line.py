"""The ``tmlbench`` command line.

It answers at once: a module imported here loads with every command, ``--help`` included, so
what is heavy (pandas and scikit-learn through task preparation and attempts, DuckDB, dbt)
is imported inside the command that needs it. tests/runner/test_cli_startup.py keeps it so.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.text import Text

from runner import __version__
from runner.config import Paths
from runner.errors import TmlbenchError
from runner.terminal import console, err_console, printable

if TYPE_CHECKING:
    from runner.agents.check import CheckStep
    from runner.specs.registry import SpecProblem
    from runner.tasks.prepared_files import PreparedTask


class _BackendChoice(click.Choice[str]):
    """The sandbox backends, looked up when an option is parsed or its help shown: importing
    runner.sandbox at start-up would load every backend's module for every command."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        from runner.sandbox import BACKENDS

        return BACKENDS

    @choices.setter
    def choices(self, _value: tuple[str, ...]) -> None:  # click.Choice.__init__ sets it
        pass


BACKEND_CHOICE = _BackendChoice()


@click.group()
@click.version_option(__version__, prog_name="tmlbench")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """tmlbench: how well and how reliably do data-science agents solve tabular tasks?"""
    ctx.obj = Paths.from_env()


@cli.group()
def tasks() -> None:
    """The task suite: list tasks, prepare their data."""


@tasks.command("list")
@click.pass_obj
def tasks_list(paths: Paths) -> None:
    """List the tasks and whether their data is prepared."""
    from rich.table import Table

    from runner.specs.registry import list_tasks
    from runner.tasks.prepared_files import prepared_task

    listing = list_tasks(paths.tasks_dir)
    table = Table("task", "type", "metric", "full rows", "kaggle competition", "prepared")
    for task in listing.specs:
        prepared = prepared_task(paths.data_dir, task.id)
        table.add_row(
            task.id,
            task.task_type,
            f"{task.metric.name} ({task.metric.direction})",
            f"{task.source.twin.default_rows:,}" if task.source.twin else "-",
            task.source.kaggle.competition if task.source.kaggle else "-",
            _prepared_label(prepared),
        )
    console.print(table)
    _exit_if_skipped(listing.problems, "task")


@tasks.command("prepare")
@click.argument("task_ids", nargs=-1)
@click.option("--all", "all_tasks", is_flag=True, help="Prepare every task.")
@click.option(
    "--from",
    "download",
    type=click.Path(exists=True, path_type=Path),
    help="The competition's Kaggle download (zip or folder) instead of the offline twin.",
)
@click.option(
    "--rows", type=click.IntRange(min=50), help="Twin size (default: the competition's size)."
)
@click.option(
    "--scale",
    type=click.FloatRange(min=0, min_open=True, max=1),
    help="Twin size as a share of the competition's size, e.g. 0.01.",
)
@click.option("--seed", type=int, help="Twin generator seed (default: the task's).")
@click.option(
    "--suite",
    "suite_id",
    help="Prepare for this suite (suites/<id>.yaml): into its data folder, at its twin size; "
    "no TASK_IDS: all of its tasks.",
)
@click.pass_obj
def tasks_prepare(
    paths: Paths,
    task_ids: tuple[str, ...],
    all_tasks: bool,
    download: Path | None,
    rows: int | None,
    scale: float | None,
    seed: int | None,
    suite_id: str | None,
) -> None:
    """Prepare TASK_IDS: public files for agents, private answers for grading."""
    from runner.specs.registry import list_tasks, load_suite, load_task
    from runner.suites.benchmark_settings import SuiteLayout
    from runner.tasks.preparation import prepare_from_download, prepare_twin

    skipped: list[SpecProblem] = []
    if suite_id is not None:
        suite = load_suite(paths.suites_dir, suite_id)
        paths = replace(paths, data_dir=SuiteLayout.of(suite, paths).data_dir)
        rows = rows if rows or scale else suite.twin_rows
        task_ids = task_ids or (() if all_tasks else tuple(suite.tasks))
    if all_tasks:
        listing = list_tasks(paths.tasks_dir)
        task_ids, skipped = tuple(listing.ids), listing.problems
    if not task_ids:
        raise TmlbenchError("name at least one task (see: tmlbench tasks list) or pass --all")
    if rows and scale:
        raise TmlbenchError("pass --rows or --scale, not both")
    if download and len(task_ids) != 1:
        raise TmlbenchError("--from prepares one task at a time: name exactly one task")
    for task_id in task_ids:
        task = load_task(paths.tasks_dir, task_id)
        with console.status(f"preparing {task_id}"):
            if download:
                prepared = prepare_from_download(task, paths.tasks_dir, paths.data_dir, download)
            else:
                prepared = prepare_twin(
                    task, paths.tasks_dir, paths.data_dir, rows=rows, scale=scale, seed=seed
                )
        console.print(
            f"[green]prepared[/] {task_id} → {prepared.root} ({_prepared_label(prepared)})"
        )
    _exit_if_skipped(skipped, "task")


def _exit_if_skipped(problems: list[SpecProblem], kind: str) -> None:
    """After a command did what it could with the valid specs: a warning per spec file it
    skipped (on stderr, naming the file and what is wrong), then exit status 1."""
    if not problems:
        return
    for problem in problems:
        err_console.print(f"skipped {problem.message}", markup=False, highlight=False)
    err_console.print(
        f"{len(problems)} {kind} spec file(s) skipped, the others were used: fix each file as "
        "its line says (or move it out of the folder). Exit status 1."
    )
    sys.exit(1)


def _prepared_label(prepared: PreparedTask) -> str:
    if not prepared.exists():
        return "no"
    meta = prepared.meta()
    manifest = prepared.manifest()
    source = meta.source.kind if meta.source else "by hand"
    label = f"{source}, {manifest.rows('train.csv'):,} train / {manifest.rows('test.csv'):,} test"
    if meta.bayes_optimal_score is not None:
        label += f", bayes {meta.bayes_optimal_score:.4f}"
    return label


@cli.group()
def agents() -> None:
    """The agents that can be benchmarked."""


@agents.command("list")
@click.pass_obj
def agents_list(paths: Paths) -> None:
    """List the agent specs (and, for CLI agents, whether their CLI is installed)."""
    from rich.table import Table

    from runner.agents.installs import find_installed
    from runner.specs.registry import list_agents

    listing = list_agents(paths.agents_dir)
    table = Table("agent", "kind", "title", "harness", "model", "cli", "cpus", "memory")
    for agent in listing.specs:
        model = "/".join(x for x in (agent.model.provider, agent.model.model_id) if x) or "-"
        installed = find_installed(agent.cli, paths.clis_dir) if agent.cli else None
        cli_state = "-"
        if agent.cli is not None:
            cli_state = installed.reported_version if installed else "not installed"
        table.add_row(
            agent.id,
            agent.kind,
            agent.title,
            f"{agent.harness} {agent.harness_version}",
            model,
            cli_state,
            str(agent.limits.cpus),
            f"{agent.limits.memory_gb:g} GB",
        )
    console.print(table)
    _exit_if_skipped(listing.problems, "agent")


@agents.command("install")
@click.argument("agent_ids", nargs=-1)
@click.option("--all", "all_agents", is_flag=True, help="Install the CLI of every agent spec.")
@click.pass_obj
def agents_install(paths: Paths, agent_ids: tuple[str, ...], all_agents: bool) -> None:
    """Install the pinned CLI of command agents into tmlbench's prefix (cached by version)."""
    from runner.agents.installs import install
    from runner.specs.registry import list_agents, load_agent

    if all_agents == bool(agent_ids):
        raise click.UsageError("name the agents to install, or give --all")
    skipped: list[SpecProblem] = []
    if all_agents:
        listing = list_agents(paths.agents_dir)
        chosen, skipped = [a for a in listing.specs if a.cli is not None], listing.problems
    else:
        chosen = [load_agent(paths.agents_dir, a) for a in agent_ids]
    done: set[str] = set()  # several agents share one CLI
    for agent in chosen:
        if agent.cli is None:
            raise TmlbenchError(f"agent {agent.id} has no 'cli' to install (kind {agent.kind})")
        key = agent.cli.describe()
        if key in done:
            continue
        with console.status(f"installing {key} (for {agent.id})"):
            installed = install(agent, paths.clis_dir)
        done.add(key)
        console.print(
            f"{agent.cli.bin}: {installed.reported_version} ({key}, {installed.runtime}) "
            f"in {installed.root}"
        )
    _exit_if_skipped(skipped, "agent")


@agents.command("check")
@click.argument("agent_id")
@click.option("--backend", type=BACKEND_CHOICE, default="bwrap", show_default=True)
@click.option(
    "--budget", type=click.IntRange(min=30), default=240, show_default=True,
    help="Seconds for the solving attempt.",
)  # fmt: skip
@click.option(
    "--keep",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the prepared task and both attempts' run folders here (default: a temp folder).",
)
@click.pass_obj
def agents_check(paths: Paths, agent_id: str, backend: str, budget: int, keep: Path | None) -> None:
    """Offline pre-flight of a CLI agent against a scripted provider: no key, no network."""
    from runner.agents.check import check_agent  # starts a server; only this command needs it
    from runner.specs.registry import load_agent

    agent = load_agent(paths.agents_dir, agent_id)
    marks = {True: "[green]ok[/green]", False: "[red]FAILED[/red]", None: "[dim]-[/dim]"}

    def show(step: CheckStep) -> None:
        console.print(f"{marks[step.ok]:>24}  {step.name}: {step.detail}")
        if step.hint:
            console.print(f"{'':>10}what to do: {step.hint}")

    console.print(
        f"checking {agent.id} on {backend} against a scripted {agent.gateway.protocol if agent.gateway else ''} provider"
    )
    report = check_agent(agent, paths, backend=backend, budget=budget, work_dir=keep, on_step=show)
    console.print(f"run folders: {report.runs_dir}")
    if not report.ok:
        raise SystemExit(1)


@cli.command("run")
@click.option("--agent", "agent_id", required=True, help="Agent id (see: tmlbench agents list).")
@click.option("--task", "task_id", required=True, help="Task id (see: tmlbench tasks list).")
@click.option(
    "--budget", type=click.IntRange(min=1), required=True, help="Wall-clock budget in seconds."
)
@click.option(
    "--attempt", "attempt_index", type=click.IntRange(min=0), default=0, show_default=True
)
@click.option(
    "--profile",
    default=None,
    help="Instruction profile; default: the benchmark's pairing for the budget "
    "(240 s quick, 600 s good, 1200 s xgboost, other budgets standard).",
)
@click.option("--backend", type=BACKEND_CHOICE, default="bwrap", show_default=True)
@click.option(
    "--unsafe-no-isolation", is_flag=True, help="Allow an untrusted agent on the process backend."
)
@click.pass_obj
def run_cmd(
    paths: Paths,
    agent_id: str,
    task_id: str,
    budget: int,
    attempt_index: int,
    profile: str | None,
    backend: str,
    unsafe_no_isolation: bool,
) -> None:
    """Run one attempt and print its record."""
    from runner.attempts.attempt import AttemptContext, AttemptPlan, run_attempt
    from runner.sandbox import get_sandbox
    from runner.specs import DEFAULT_PROFILES_BY_BUDGET
    from runner.specs.registry import agent_code_dir, load_agent, load_task, task_spec_sha256
    from runner.tasks.prepared_files import prepared_task

    profile = profile or DEFAULT_PROFILES_BY_BUDGET.get(budget, "standard")
    agent = load_agent(paths.agents_dir, agent_id)
    task = load_task(paths.tasks_dir, task_id)
    prepared = prepared_task(paths.data_dir, task_id)
    if not prepared.exists():
        raise TmlbenchError(
            f"task {task_id} is not prepared; run: tmlbench tasks prepare {task_id}"
        )
    plan = AttemptPlan(agent, task, budget, attempt_index, profile)
    ctx = AttemptContext(
        prepared=prepared,
        runs_dir=paths.runs_dir,
        sandbox=get_sandbox(backend),
        agent_code_dir=agent_code_dir(paths.agents_dir, agent),
        task_spec_sha256=task_spec_sha256(paths.tasks_dir, task_id),
        allow_unsafe=unsafe_no_isolation,
        clis_dir=paths.clis_dir,
    )
    with console.status(f"{plan.run_id}: running (budget {budget} s)"):
        record = run_attempt(plan, ctx)
    console.print_json(record.model_dump_json())
    console.print(f"record: {paths.runs_dir / record.run_id / 'record.json'}")


@cli.command("bench")
@click.option(
    "--suite", "suite_id", default="demo", show_default=True, help="Suite id (suites/<id>.yaml)."
)
@click.option("--backend", type=BACKEND_CHOICE, default="bwrap", show_default=True)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Attempts at once (default: one per free CPU share).",
)
@click.option(
    "--unsafe-no-isolation", is_flag=True, help="Allow untrusted agents on the process backend."
)
@click.pass_obj
def bench_cmd(
    paths: Paths, suite_id: str, backend: str, concurrency: int | None, unsafe_no_isolation: bool
) -> None:
    """Run every attempt of a suite that is not recorded yet, then say what happened."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from runner.sandbox import get_sandbox
    from runner.specs.registry import load_suite
    from runner.suites.bench import Bench
    from runner.suites.scheduling import AttemptDone

    suite = load_suite(paths.suites_dir, suite_id)
    bench = Bench(
        suite,
        paths,
        get_sandbox(backend),
        concurrency=concurrency,
        allow_unsafe=unsafe_no_isolation,
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[last]}"),
    )
    with Progress(*columns, console=console) as progress:
        prep = progress.add_task("tasks prepared", total=len(bench.tasks), last="")
        bench.prepare(on_prepared=lambda task: progress.update(prep, advance=1, last=task.id))
        bar = progress.add_task(f"{suite.id}: settings done", total=len(bench.settings), last="")
        attempts = 0

        def on_progress(done: AttemptDone) -> None:
            nonlocal attempts
            attempts += 1
            last = f"{done.record.run_id} {done.record.status}" if done.new else "already recorded"
            progress.update(bar, completed=done.settings_done, last=f"{attempts} attempts; {last}")

        run = bench.run(on_progress=on_progress)
    # What the run did, in facts: what the results mean is the warehouse's to say.
    statuses = ", ".join(f"{n} {status}" for status, n in run.status_counts().items())
    console.print(
        f"{suite.id}: {len(run.records)} attempts recorded in {len(run.outcomes)} settings "
        f"({run.new_attempts} new in this run): {statuses or 'none'}"
    )
    if run.incomplete:
        console.print(f"settings short of {suite.attempts} successes: {len(run.incomplete)}")
    console.print(f"records: {run.runs_dir}")
    console.print(
        f"see the results: tmlbench warehouse build, then tmlbench leaderboard --suite {suite.id}"
    )
    if run.harness_faults:
        raise TmlbenchError(run.fault_report())


@cli.command("resume")
@click.option(
    "--suite", "suite_id", default="demo", show_default=True, help="Suite id (suites/<id>.yaml)."
)
@click.argument("setting_keys", nargs=-1)
@click.pass_obj
def resume_cmd(paths: Paths, suite_id: str, setting_keys: tuple[str, ...]) -> None:
    """Resume settings stopped at their harness-error or provider-error ceiling.

    SETTING_KEYS (agent|task|budget; none: every setting of the suite) that are stopped get a
    full ceiling again: the faults recorded so far stop counting toward it. No record is changed
    or deleted; the resumption is logged in the suite's runs folder (resumptions.jsonl). Fix the
    fault first, then run the suite again (`tmlbench bench`).
    """
    from runner.specs.registry import load_suite
    from runner.suites.bench import Bench

    bench = Bench(load_suite(paths.suites_dir, suite_id), paths)
    resumed = bench.resume(setting_keys or None, by="tmlbench resume")
    if not resumed:
        console.print(f"{suite_id}: no selected setting is stopped at a fault ceiling")
        return
    for resumption in resumed:
        console.print(
            f"resumed {resumption.setting}: {len(resumption.forgiven)} fault(s) no longer count "
            "toward its ceilings"
        )
    console.print(f"run the suite again: tmlbench bench --suite {suite_id}")


def _add_plugin_commands(group: click.Group) -> None:
    """Commands other components contribute (entry points in group ``tmlbench.commands``).

    The engine never imports them by name: the warehouse and orchestration build on the
    runner, not the other way round.
    """
    for entry_point in entry_points(group="tmlbench.commands"):
        group.add_command(entry_point.load(), entry_point.name)


_add_plugin_commands(cli)


def main() -> None:
    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("[red]aborted[/]")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TmlbenchError as exc:
        # The message may quote a file, a database or a sandbox: shown as text, never acted on.
        message = Text.assemble(
            ("error:", "bold red"), " ", printable(str(exc), keep_newlines=True)
        )
        console.print(message, highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
