"""Validated, frozen models of the task and agent spec files (``tasks/*/task.yaml``, ``agents/*.yaml``)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from runner.errors import SpecError, describe_validation_error
from runner.templates import FIELDS as TEMPLATE_FIELDS
from runner.templates import unknown_placeholders


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MetricSpec(Frozen):
    name: str = Field(description="metric name in runner.metrics, e.g. 'auc' or 'rmse'")
    direction: Literal["maximize", "minimize"]


class SubmissionSpec(Frozen):
    # One name in the workspace's top folder: the grader refuses a symlinked file, but a
    # folder in a longer path would be the agent's and could be a symlink out of it.
    file: str = "submission.csv"
    columns: tuple[str, ...]

    @field_validator("file")
    @classmethod
    def _one_name(cls, value: str) -> str:
        if not value or "/" in value or "\x00" in value or value in (".", ".."):
            raise ValueError(
                f"must be one file name in the workspace's top folder (e.g. submission.csv), "
                f"not {value!r}"
            )
        return value


class SplitSpec(Frozen):
    strategy: Literal["stratified", "random"]
    test_fraction: float = Field(gt=0, lt=1)
    seed: int


class TwinSource(Frozen):
    generator: str = Field(description="file in the task folder defining generate(n_rows, seed)")
    default_rows: int = Field(
        gt=0, description="rows of the full-size twin (the real competition's size)"
    )
    seed: int = 20240101


class KaggleSource(Frozen):
    competition: str
    train_file: str = "train.csv"
    url: str | None = None


class SourceSpec(Frozen):
    twin: TwinSource | None = None
    kaggle: KaggleSource | None = None


class TaskSpec(Frozen):
    id: str
    title: str
    task_type: Literal["binary", "regression"]
    id_column: str
    target_column: str
    feature_columns: tuple[str, ...]
    metric: MetricSpec
    submission: SubmissionSpec
    split: SplitSpec
    source: SourceSpec
    start_date: dt.date = Field(description="competition start, for contamination checks")

    @model_validator(mode="after")
    def _consistent(self) -> TaskSpec:
        if set(self.submission.columns) != {self.id_column, self.target_column}:
            raise ValueError(
                f"submission.columns {list(self.submission.columns)} must be exactly "
                f"[{self.id_column!r}, {self.target_column!r}] (id column and target column)"
            )
        if self.task_type == "binary" and self.split.strategy != "stratified":
            raise ValueError("binary tasks must use split.strategy 'stratified'")
        clash = {self.id_column, self.target_column} & set(self.feature_columns)
        if clash:
            raise ValueError(
                f"feature_columns must not contain the id or target column: {sorted(clash)}"
            )
        return self


class AgentLimits(Frozen):
    cpus: int = Field(
        default=1, gt=0, description="CPU cores pinned to each attempt (its fixed share)"
    )
    memory_gb: float = Field(default=4.0, gt=0)
    pids: int = Field(default=256, gt=0)
    disk_gb: float = Field(default=2.0, gt=0)
    files: int = Field(
        default=200_000, gt=0, description="files and folders the workspace may hold (inodes)"
    )


class ModelIdentity(Frozen):
    provider: str | None = None
    model_id: str | None = None
    knowledge_cutoff: dt.date | None = None


class TokenPrices(Frozen):
    """USD per million tokens, from the provider's price page (cost = tokens × price)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)

    def cost(self, tokens_in: int | None, tokens_out: int | None) -> float | None:
        """USD for these tokens; unknown (None) when either count is unknown."""
        if tokens_in is None or tokens_out is None:
            return None
        return (tokens_in * self.input_per_mtok + tokens_out * self.output_per_mtok) / 1e6


def _require_http_url(field: str, url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"{field} must start with http:// or https://, got {url!r}")


class LlmSpec(Frozen):
    """How the built-in coding agent reaches its model: any OpenAI-compatible endpoint."""

    base_url: str = Field(description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(
        default=None,
        description="name of the harness's environment variable holding the key; "
        "None for local servers without auth. The key never enters the sandbox.",
    )
    temperature: float | None = Field(default=0.0, ge=0)
    max_tokens: int | None = Field(default=4096, gt=0, description="per model reply")
    prices: TokenPrices | None = None
    request_timeout_seconds: float = Field(default=300, gt=0)
    max_retries: int = Field(default=5, ge=0, description="per request, on 429/5xx/network errors")
    max_steps: int = Field(default=200, gt=0, description="model replies per attempt")
    context_chars: int = Field(
        default=200_000,
        gt=0,
        description="above this many characters of conversation, old tool outputs are elided",
    )
    tool_output_chars: int = Field(default=8_000, gt=0, description="per tool result")
    read_file_bytes: int = Field(default=50_000, gt=0, description="cap of the read_file tool")
    extra_body: dict[str, object] = Field(
        default_factory=dict, description="extra fields sent with every chat-completions request"
    )

    @model_validator(mode="after")
    def _http_url(self) -> LlmSpec:
        _require_http_url("llm.base_url", self.base_url)
        return self


class EgressSpec(Frozen):
    """Hosts besides its provider that a command agent may reach, through the harness's proxy.

    Every other host is refused and recorded (``egress_denied_hosts``); an empty list is the
    usual case, as the provider is reached through the gateway instead.
    """

    allow: tuple[str, ...] = Field(
        default=(), description="'host' (port 443) or 'host:port' the agent may reach"
    )


EXACT_VERSION = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+_-]*")


class CliSpec(Frozen):
    """An agent CLI pinned to one version: ``tmlbench agents install`` puts it in a managed prefix."""

    npm: str | None = Field(default=None, description="npm package, e.g. '@openai/codex'")
    pypi: str | None = Field(default=None, description="PyPI distribution, e.g. 'aider-chat'")
    path: str | None = Field(
        default=None, description="host folder holding an already installed CLI (bin/ or itself)"
    )
    version: str = Field(description="the exact version to install (no ranges)")
    bin: str = Field(description="the executable's name, on PATH inside the sandbox")
    version_args: tuple[str, ...] = Field(
        default=("--version",), description="arguments that make it print its version"
    )
    requirements: tuple[str, ...] = Field(
        default=(), description="pypi only: exact pins installed beside it ('name==1.2.3')"
    )

    @model_validator(mode="after")
    def _one_source(self) -> CliSpec:
        sources = [name for name in ("npm", "pypi", "path") if getattr(self, name)]
        if len(sources) != 1:
            raise ValueError(f"cli needs exactly one of npm, pypi, path (got {sources or 'none'})")
        if not EXACT_VERSION.fullmatch(self.version):
            raise ValueError(f"cli.version must be one exact version, got {self.version!r}")
        if "/" in self.bin or not self.bin:
            raise ValueError(f"cli.bin must be an executable's name, got {self.bin!r}")
        if self.requirements and not self.pypi:
            raise ValueError("cli.requirements are for pypi CLIs only")
        loose = [r for r in self.requirements if "==" not in r]
        if loose:
            raise ValueError(f"cli.requirements must be exact pins (name==version): {loose}")
        return self

    @property
    def source(self) -> Literal["npm", "pypi", "path"]:
        return "npm" if self.npm else "pypi" if self.pypi else "path"

    @property
    def package(self) -> str:
        return self.npm or self.pypi or self.path or ""

    def describe(self) -> str:
        return f"{self.source} {self.package} {self.version}"


GatewayProtocol = Literal["openai-chat", "openai-responses", "anthropic-messages"]


class GatewaySpec(Frozen):
    """A command agent's model provider, reached only through the harness's gateway.

    Inside the sandbox the CLI is given ``{gateway_url}`` as its base URL and
    ``{gateway_key}`` (a placeholder) as its key; the gateway forwards to ``base_url`` with
    the real key and counts usage from every response.
    """

    protocol: GatewayProtocol
    base_url: str = Field(description="the provider's real base URL, e.g. https://llm.chutes.ai/v1")
    api_key_env: str | None = Field(
        default=None, description="harness variable holding the key; None for local servers"
    )
    prices: TokenPrices | None = None
    request_timeout_seconds: float = Field(default=600, gt=0)

    @model_validator(mode="after")
    def _http_url(self) -> GatewaySpec:
        _require_http_url("gateway.base_url", self.base_url)
        return self


FILE_MAX_BYTES = 1024**2  # each of a command agent's config files


def _check_placeholders(where: str, text: str) -> None:
    unknown = unknown_placeholders(text)
    if unknown:
        raise ValueError(
            f"{where}: unknown placeholder(s) {', '.join('{' + n + '}' for n in unknown)} "
            f"(known: {', '.join(TEMPLATE_FIELDS)}; write {{{{name}}}} for a literal {{name}})"
        )


class AgentSpec(Frozen):
    id: str
    kind: Literal["baseline", "command", "llm"]
    title: str
    harness: str = Field(description="what drives the model or program, e.g. 'tmlbench-baseline'")
    harness_version: str = Field(
        default="1", description="for a command agent with 'cli': the version the CLI reports"
    )
    model: ModelIdentity = ModelIdentity()
    command: tuple[str, ...] = Field(
        default=(),
        description="argv template; placeholders "
        + " ".join("{" + f + "}" for f in TEMPLATE_FIELDS),
    )
    code_dir: str | None = Field(
        default=None,
        description="folder (relative to the agent file) mounted read-only at {agent_dir}",
    )
    limits: AgentLimits = AgentLimits()
    trusted: bool = Field(
        default=False,
        description="built-in code we wrote; only trusted agents may use the process backend",
    )
    llm: LlmSpec | None = Field(default=None, description="kind 'llm' only: the model endpoint")
    cli: CliSpec | None = Field(default=None, description="kind 'command' only: the pinned CLI")
    gateway: GatewaySpec | None = Field(
        default=None, description="kind 'command' only: its model provider, behind the gateway"
    )
    egress: EgressSpec | None = Field(
        default=None, description="kind 'command' only: other hosts reachable through the proxy"
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="kind 'command' only: non-secret variables for the CLI (templates allowed)",
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="kind 'command' only: files written into HOME before it starts "
        "(relative path -> contents; templates allowed)",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, data: object) -> object:
        if isinstance(data, dict) and "secrets" in data:
            raise ValueError(
                "'secrets' is gone: no key ever enters the sandbox. Give the provider as "
                "'gateway' (protocol, base_url, api_key_env) and hand the CLI {gateway_url} "
                "and {gateway_key} instead"
            )
        return data

    @model_validator(mode="after")
    def _runnable(self) -> AgentSpec:
        if self.kind in ("baseline", "command") and not self.command:
            raise ValueError(f"agent kind {self.kind!r} needs a 'command' argv template")
        if self.kind == "llm":
            if self.llm is None:
                raise ValueError(
                    "agent kind 'llm' needs an 'llm' block (base_url, api_key_env, ...)"
                )
            if not self.model.model_id:
                raise ValueError("agent kind 'llm' needs model.model_id (sent to the endpoint)")
            if self.command:
                raise ValueError("agent kind 'llm' runs the built-in agent loop: drop 'command'")
        elif self.llm is not None:
            raise ValueError(f"'llm' is only for agent kind 'llm', not {self.kind!r}")
        command_only = {"cli": self.cli, "gateway": self.gateway, "egress": self.egress}
        command_only |= {"env": self.env, "files": self.files}
        misplaced = [name for name, value in command_only.items() if value]
        if self.kind != "command" and misplaced:
            raise ValueError(f"{', '.join(misplaced)}: only for agent kind 'command'")
        for i, part in enumerate(self.command):
            _check_placeholders(f"command[{i}]", part)
        for name, value in self.env.items():
            _check_placeholders(f"env.{name}", value)
        for name, text in self.files.items():
            _check_placeholders(f"files.{name}", text)
            if len(text.encode("utf-8")) > FILE_MAX_BYTES:
                raise ValueError(f"files.{name}: over {FILE_MAX_BYTES} bytes (a config file)")
            if name.startswith("/") or ".." in Path(name).parts or not name.strip():
                raise ValueError(f"files.{name}: give a path relative to HOME, without '..'")
        uses_gateway = any(
            "{gateway_" in text
            for text in (*self.command, *self.env.values(), *self.files.values())
        )
        if uses_gateway and self.gateway is None:
            raise ValueError("{gateway_url}/{gateway_key} are used but no 'gateway' is given")
        return self


M = TypeVar("M", bound=BaseModel)


def load_yaml_model(path: Path, model: type[M]) -> M:
    """Read ``path`` as YAML into ``model``; any problem becomes a SpecError naming file and field."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise SpecError(f"{path}: file not found") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping of fields at the top level")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = describe_validation_error(exc, limit=20)
        raise SpecError(f"{path}: invalid {model.__name__}: {problems}") from exc


# The benchmark's default pairing of budget and instruction profile. Profile and budget are
# separate settings (both recorded on every run), so a suite can pair them any other way.
DEFAULT_PROFILES_BY_BUDGET = {240: "quick", 600: "good", 1200: "xgboost"}


class SuiteSpec(Frozen):
    """Which settings a benchmark run covers: agents × tasks × budgets, each attempted N times.

    A setting (agent, task, budget) is done once it has ``attempts`` successes, or once the
    agent has used ``max_attempts`` attempts (harness faults never count against the agent).
    Harness faults are re-run, so a fault that keeps coming back would re-run a setting forever:
    once a setting has ``harness_error_ceiling`` harness_error attempts it gets no more.
    """

    id: str
    title: str
    tasks: tuple[str, ...] = Field(min_length=1)
    agents: tuple[str, ...] = Field(min_length=1)
    budgets: tuple[int, ...] = Field(min_length=1, description="seconds of wall clock per attempt")
    attempts: int = Field(default=5, gt=0, description="successes wanted per setting")
    max_attempts: int | None = Field(
        default=None,
        gt=0,
        description="agent attempts per setting before giving up; None = 2 × attempts",
    )
    harness_error_ceiling: int = Field(
        default=3,
        description="harness_error attempts a setting may have before it gets no more attempts "
        "(they do not use up max_attempts, so without a ceiling a recurring fault re-runs forever)",
    )
    instruction_profile: str = Field(
        default="standard", description="profile of every budget not named in instruction_profiles"
    )
    instruction_profiles: dict[int, str] | None = Field(
        default=None,
        description="budget (seconds) → instruction profile; None = the default pairing "
        "(240 s quick, 600 s good, 1200 s xgboost)",
    )
    twin_rows: int | None = Field(
        default=None, gt=0, description="rows of each offline twin; None = the task's full size"
    )
    data_subdir: str = Field(
        default=".", description="prepared data lives in <data_dir>/<data_subdir>/tasks/<task_id>"
    )
    runs_subdir: str = Field(
        default=".", description="records live in <runs_dir>/<runs_subdir>/<run_id>"
    )
    concurrency: int | None = Field(
        default=None, gt=0, description="attempts at once; None = as many as the host's cores allow"
    )
    cpus_per_attempt: int | None = Field(
        default=None,
        gt=0,
        description="CPU cores pinned to each attempt; None = each agent's own limits.cpus",
    )

    @field_validator("harness_error_ceiling", mode="before")
    @classmethod
    def _whole_ceiling(cls, value: object) -> object:
        # before pydantic's coercion: true, 2.5 or "3" in a suite file is a mistake, not a number
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(
                "must be a whole number of at least 1 (a setting gets no more attempts once it "
                f"has this many harness_error attempts), got {value!r}"
            )
        return value

    @model_validator(mode="after")
    def _consistent_suite(self) -> SuiteSpec:
        for name in ("tasks", "agents", "budgets"):
            values = getattr(self, name)
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ValueError(f"{name} lists {dupes} more than once")
        if any(b <= 0 for b in self.budgets):
            raise ValueError(f"budgets must be positive seconds, got {list(self.budgets)}")
        if self.max_attempts is not None and self.max_attempts < self.attempts:
            raise ValueError(
                f"max_attempts ({self.max_attempts}) must be at least attempts ({self.attempts})"
            )
        stray = sorted(set(self.instruction_profiles or {}) - set(self.budgets))
        if stray:
            raise ValueError(
                f"instruction_profiles names budgets {stray} that are not in budgets {list(self.budgets)}"
            )
        from runner.instructions import PROFILE_NOTES  # runner.instructions imports this module

        for profile in {self.instruction_profile, *self.profiles_by_budget().values()}:
            if profile not in PROFILE_NOTES:
                raise ValueError(
                    f"unknown instruction profile {profile!r} (known: {', '.join(PROFILE_NOTES)})"
                )
        return self

    @property
    def attempt_ceiling(self) -> int:
        """Agent attempts a setting may use before it is given up (``max_attempts`` or 2 × attempts)."""
        return self.max_attempts or 2 * self.attempts

    def profiles_by_budget(self) -> dict[int, str]:
        if self.instruction_profiles is None:
            return dict(DEFAULT_PROFILES_BY_BUDGET)
        return self.instruction_profiles

    def profile_for(self, budget_seconds: int) -> str:
        """The instruction profile of a budget (recorded on every run next to the budget)."""
        return self.profiles_by_budget().get(budget_seconds, self.instruction_profile)
